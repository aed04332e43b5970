// DDTree per-step tree kernels: best-first build + verify layout, and the tree walk.
//
// One thread block per request. The builder is the same best-first enumeration as
// sglang_ddtree.core.tree_builder.build_tree_reference, with the same ordering key
// (-score, depth, parent's order, rank) and the same fp32 sums (parent_score + lp), so its
// output is bit-identical to the reference; thread 0 runs the heap (B pops, a heap of at most
// B + 1 entries in shared memory), then all threads write the verify layout.
//
// Shapes (contiguous):
//   lp [bs, L, K] f32 (sorted desc along K), ids [bs, L, K] i64, root [bs] i64, prefix [bs] i64
//   tree_{depth,parent,rank,token} [bs, B] i64, tree_score [bs, B] f32
//   lay_{tokens,depth,positions,parent,first_child,next_sibling} [bs, n] i64 (n = B + 1)
//   lay_mask [bs, n, n] u8 (bool)
#include <cuda_runtime.h>
#include <stdint.h>
#include <math.h>

namespace ddtree {

struct HeapEntry {
  float score;
  float pscore;
  int32_t depth;
  int32_t porder;  // parent's pop position + 1 (root = 0)
  int32_t rank;
  int32_t pidx;    // parent's pop index (-1 = root)
};

__device__ __forceinline__ bool before(const HeapEntry& a, const HeapEntry& b) {
  if (a.score != b.score) return a.score > b.score;
  if (a.depth != b.depth) return a.depth < b.depth;
  if (a.porder != b.porder) return a.porder < b.porder;
  return a.rank < b.rank;
}

__device__ void heap_push(HeapEntry* h, int& size, const HeapEntry& e) {
  int i = size++;
  while (i > 0) {
    int p = (i - 1) >> 1;
    if (!before(e, h[p])) break;
    h[i] = h[p];
    i = p;
  }
  h[i] = e;
}

__device__ HeapEntry heap_pop(HeapEntry* h, int& size) {
  HeapEntry top = h[0];
  HeapEntry last = h[--size];
  int i = 0;
  while (true) {
    int c = 2 * i + 1;
    if (c >= size) break;
    if (c + 1 < size && before(h[c + 1], h[c])) c++;
    if (!before(h[c], last)) break;
    h[i] = h[c];
    i = c;
  }
  if (size > 0) h[i] = last;
  return top;
}

__global__ void build_tree_layout_kernel(
    const float* __restrict__ lp, const int64_t* __restrict__ ids,
    const int64_t* __restrict__ root, const int64_t* __restrict__ prefix,
    int L, int K, int B, int l_eff, int k_eff,
    int64_t* __restrict__ t_depth, int64_t* __restrict__ t_parent,
    int64_t* __restrict__ t_rank, int64_t* __restrict__ t_token, float* __restrict__ t_score,
    int64_t* __restrict__ y_tokens, int64_t* __restrict__ y_depth,
    int64_t* __restrict__ y_pos, int64_t* __restrict__ y_parent,
    int64_t* __restrict__ y_first, int64_t* __restrict__ y_next, uint8_t* __restrict__ y_mask) {
  extern __shared__ unsigned char smem[];
  const int n = B + 1;
  HeapEntry* heap = reinterpret_cast<HeapEntry*>(smem);
  int32_t* par = reinterpret_cast<int32_t*>(heap + (B + 1));  // verify-position parents [n]
  const int b = blockIdx.x;
  const float* lpb = lp + (int64_t)b * L * K;
  const int64_t* idb = ids + (int64_t)b * L * K;
  const int64_t pre = prefix[b];

  if (threadIdx.x == 0) {
    int size = 0, popped = 0;
    par[0] = -1;
    if (l_eff > 0 && k_eff > 0 && B > 0) {
      HeapEntry e{0.0f + lpb[0], 0.0f, 1, 0, 0, -1};
      heap_push(heap, size, e);
    }
    while (size > 0 && popped < B) {
      HeapEntry e = heap_pop(heap, size);
      const int me = popped++;
      const int64_t o = (int64_t)b * B + me;
      t_depth[o] = e.depth;
      t_parent[o] = e.pidx;
      t_rank[o] = e.rank;
      t_token[o] = idb[(e.depth - 1) * K + e.rank];
      t_score[o] = e.score;
      par[me + 1] = e.pidx >= 0 ? e.pidx + 1 : 0;
      if (e.rank + 1 < k_eff) {
        HeapEntry s{e.pscore + lpb[(e.depth - 1) * K + e.rank + 1], e.pscore, e.depth, e.porder,
                    e.rank + 1, e.pidx};
        heap_push(heap, size, s);
      }
      if (e.depth < l_eff) {
        HeapEntry c{e.score + lpb[e.depth * K], e.score, e.depth + 1, me + 1, 0, me};
        heap_push(heap, size, c);
      }
    }
    for (int i = popped; i < B; ++i) {
      const int64_t o = (int64_t)b * B + i;
      t_depth[o] = -1; t_parent[o] = -1; t_rank[o] = -1; t_token[o] = -1; t_score[o] = -INFINITY;
      par[i + 1] = -1;
    }
    // Sibling links: children in increasing position.
    int64_t* first = y_first + (int64_t)b * n;
    int64_t* next = y_next + (int64_t)b * n;
    for (int i = 0; i < n; ++i) { first[i] = -1; next[i] = -1; }
    for (int i = n - 1; i >= 1; --i) {
      const int p = par[i];
      if (p < 0) continue;
      next[i] = first[p];
      first[p] = i;
    }
  }
  __syncthreads();

  // Layout rows, in parallel.
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const int64_t o = (int64_t)b * n + i;
    int64_t tok, dep;
    if (i == 0) { tok = root[b]; dep = 0; }
    else {
      const int64_t to = (int64_t)b * B + (i - 1);
      dep = t_depth[to] > 0 ? t_depth[to] : 0;
      tok = t_token[to] >= 0 ? t_token[to] : 0;
    }
    y_tokens[o] = tok;
    y_depth[o] = dep;
    y_pos[o] = pre + dep;
    y_parent[o] = par[i];
    uint8_t* row = y_mask + ((int64_t)b * n + i) * n;
    for (int j = 0; j < n; ++j) row[j] = 0;
    for (int j = i; j >= 0; j = par[j]) row[j] = 1;
  }
}

// Greedy (or sampled, given per-node target tokens) walk. One thread per request.
__global__ void tree_walk_kernel(
    const int64_t* __restrict__ tokens, const int64_t* __restrict__ first,
    const int64_t* __restrict__ next, const int64_t* __restrict__ target,
    int bs, int n, int L,
    int64_t* __restrict__ accepted, int64_t* __restrict__ accept_len,
    int64_t* __restrict__ new_tokens) {
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= bs) return;
  const int64_t* tk = tokens + (int64_t)b * n;
  const int64_t* fc = first + (int64_t)b * n;
  const int64_t* ns = next + (int64_t)b * n;
  const int64_t* tg = target + (int64_t)b * n;
  int64_t* acc = accepted + (int64_t)b * (L + 1);
  int64_t* nt = new_tokens + (int64_t)b * (L + 1);
  for (int t = 0; t <= L; ++t) { acc[t] = -1; nt[t] = -1; }
  int cur = 0, a = 0;
  acc[0] = 0;
  while (a < L) {
    const int64_t want = tg[cur];
    int c = (int)fc[cur];
    while (c >= 0 && tk[c] != want) c = (int)ns[c];
    if (c < 0) break;
    nt[a] = want;
    cur = c;
    acc[++a] = c;
  }
  accept_len[b] = a;
  nt[a] = tg[cur];
}

}  // namespace ddtree

extern "C" {

cudaError_t ddtree_build_tree_layout(
    const float* lp, const int64_t* ids, const int64_t* root, const int64_t* prefix,
    int bs, int L, int K, int B, int l_eff, int k_eff,
    int64_t* t_depth, int64_t* t_parent, int64_t* t_rank, int64_t* t_token, float* t_score,
    int64_t* y_tokens, int64_t* y_depth, int64_t* y_pos, int64_t* y_parent,
    int64_t* y_first, int64_t* y_next, uint8_t* y_mask, cudaStream_t stream) {
  if (bs == 0) return cudaSuccess;
  const size_t smem = (size_t)(B + 1) * sizeof(ddtree::HeapEntry) + (size_t)(B + 1) * sizeof(int32_t);
  if (smem > 48 * 1024) {
    cudaError_t err = cudaFuncSetAttribute(ddtree::build_tree_layout_kernel,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (err != cudaSuccess) return err;
  }
  ddtree::build_tree_layout_kernel<<<bs, 128, smem, stream>>>(
      lp, ids, root, prefix, L, K, B, l_eff, k_eff, t_depth, t_parent, t_rank, t_token, t_score,
      y_tokens, y_depth, y_pos, y_parent, y_first, y_next, y_mask);
  return cudaGetLastError();
}

cudaError_t ddtree_tree_walk(
    const int64_t* tokens, const int64_t* first, const int64_t* next, const int64_t* target,
    int bs, int n, int L, int64_t* accepted, int64_t* accept_len, int64_t* new_tokens,
    cudaStream_t stream) {
  if (bs == 0) return cudaSuccess;
  const int threads = 128;
  ddtree::tree_walk_kernel<<<(bs + threads - 1) / threads, threads, 0, stream>>>(
      tokens, first, next, target, bs, n, L, accepted, accept_len, new_tokens);
  return cudaGetLastError();
}

}  // extern "C"
