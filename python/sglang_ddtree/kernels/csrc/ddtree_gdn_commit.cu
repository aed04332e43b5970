// Tree-state commit for snapshot-free tree GatedDeltaNet verify (DDTree on hybrid targets).
//
// After the tree verify (sglang_ddtree/kernels/gdn_tree_triton.py::tree_gdn_verify) each request
// has accepted a root-to-node path p_0 .. p_n of its verify tree. Its new recurrent state, per
// value head, is (core/gdn_tree.py::gdn_commit_state)
//
//     S = exp(G_last) S0 + sum_t exp(G_last - G_{p_t}) kn_{p_t} u_{p_t}^T
//
// with kn the L2-normalised key (eps 1e-6, as the verify kernel), u the solved WY values and G
// the path decay. The state pool stores S transposed, [slots, HV, V, K] fp32, and the kernel
// overwrites the request's slot in place: every element is read and written by the same thread.
//
// Grid: (bs * HV, ceil(V / kVTile)); block: 256 threads. Shared memory holds the path's
// normalised keys [P, K], values [P, kVTile] and weights [P].
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <type_traits>

namespace {

// The fp32 exp, division and square root as Triton lowers tl.exp, `/` and tl.sqrt (its PTX:
// ex2.approx of x * log2(e), div.full, sqrt.approx.ftz), which the verify's tree conv and the
// Triton commit run: the SiLU output is rounded to bf16 as the key, and CUDA's exact expf / `/`
// differed in the last fp32 bit often enough to flip that rounding (a key one bf16 ulp off:
// 1.6e-4 relative in a committed state).
__device__ __forceinline__ float triton_exp(float x) {
  float y;
  asm("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(x * 1.4426950408889634f));
  return y;
}
__device__ __forceinline__ float triton_div(float a, float b) {
  float y;
  asm("div.full.f32 %0, %1, %2;" : "=f"(y) : "f"(a), "f"(b));
  return y;
}
__device__ __forceinline__ float triton_sqrt(float x) {
  float y;
  asm("sqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

constexpr int kVTile = 128;  // the whole value row of Qwen3.6's heads: each key formed once per head
constexpr int kThreads = 256;

template <typename KT>
__device__ __forceinline__ float to_f(KT x);
template <>
__device__ __forceinline__ float to_f<float>(float x) { return x; }
template <>
__device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }

// The path nodes' raw key rows are in kn [np, K] (the block's first pass): normalise each (a warp
// per node; eps 1e-6 as the verify kernel) and stage its value-tile row and decay weight
// exp(G_last - G_node).
__device__ __forceinline__ void finish_path_nodes(float* kn, float* us, float* w, const float* u, const float* G,
                                                  const int32_t* path, int64_t tok0, int np, int HV, int hv, int K,
                                                  int V, int v0, float g_last) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int t = warp; t < np; t += kThreads / 32) {
    const int64_t node = tok0 + path[t];
    float* kt = kn + (size_t)t * K;
    float ss = 0.f;
    for (int i = lane; i < K; i += 32) ss += kt[i] * kt[i];
    for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
    const float nrm = triton_sqrt(ss + 1e-6f);
    for (int i = lane; i < K; i += 32) kt[i] = triton_div(kt[i], nrm);
    const float* ur = u + (node * HV + hv) * (int64_t)V;
    for (int j = lane; j < kVTile; j += 32) us[t * kVTile + j] = v0 + j < V ? ur[v0 + j] : 0.f;
    if (lane == 0) w[t] = triton_exp(g_last - G[node * HV + hv]);
  }
}

// S1 = exp(G_last) S0 + sum_t w_t kn_t u_t^T over the block's [vmax, K] tile (S0 and S1 may be the
// same slot: every element is read and written by the same thread). vec: K % 4 == 0 and the pool
// 16-byte aligned, so four consecutive K elements move as one float4.
__device__ __forceinline__ void update_state_tile(const float* S0, float* S1, const float* kn, const float* us,
                                                  const float* w, int np, int K, int v0, int vmax, float a_last,
                                                  bool vec) {
  if (vec) {
    const int K4 = K >> 2;
    for (int e = threadIdx.x; e < vmax * K4; e += kThreads) {
      const int vv = e / K4, k4 = e - vv * K4;
      const int64_t off = (int64_t)(v0 + vv) * K + 4 * k4;
      const float4 s = *reinterpret_cast<const float4*>(S0 + off);
      float4 acc = make_float4(a_last * s.x, a_last * s.y, a_last * s.z, a_last * s.w);
      for (int t = 0; t < np; ++t) {
        const float4 kv = *reinterpret_cast<const float4*>(kn + (size_t)t * K + 4 * k4);
        const float wt = w[t], uv = us[t * kVTile + vv];
        acc.x += (wt * kv.x) * uv;
        acc.y += (wt * kv.y) * uv;
        acc.z += (wt * kv.z) * uv;
        acc.w += (wt * kv.w) * uv;
      }
      *reinterpret_cast<float4*>(S1 + off) = acc;
    }
    return;
  }
  for (int e = threadIdx.x; e < vmax * K; e += kThreads) {
    const int vv = e / K, kk = e % K;
    float acc = a_last * S0[(int64_t)(v0 + vv) * K + kk];
    for (int t = 0; t < np; ++t) acc += (w[t] * kn[(size_t)t * K + kk]) * us[t * kVTile + vv];
    S1[(int64_t)(v0 + vv) * K + kk] = acc;
  }
}

template <typename KT>
__global__ void gdn_tree_commit_kernel(float* __restrict__ state, const int32_t* __restrict__ state_idx,
                                       const float* __restrict__ u, const float* __restrict__ G,
                                       const KT* __restrict__ k, const int32_t* __restrict__ accepted,
                                       const int32_t* __restrict__ accept_len, int N, int H, int HV, int K,
                                       int V, int P, bool vec) {
  extern __shared__ float smem[];
  float* kn = smem;                    // [P, K]
  float* us = kn + (size_t)P * K;      // [P, kVTile]
  float* w = us + (size_t)P * kVTile;  // [P]

  const int b = blockIdx.x / HV, hv = blockIdx.x % HV, h = hv / (HV / H);
  const int v0 = blockIdx.y * kVTile;
  const int np = min(accept_len[b] + 1, P);
  const int32_t* path = accepted + (size_t)b * P;
  const int64_t tok0 = (int64_t)b * N;
  const float g_last = G[(tok0 + path[np - 1]) * HV + hv];

  for (int e = threadIdx.x; e < np * K; e += kThreads) {  // every (node, channel) at once
    const int t = e / K, i = e - t * K;
    kn[e] = to_f(k[((tok0 + path[t]) * H + h) * (int64_t)K + i]);
  }
  __syncthreads();
  finish_path_nodes(kn, us, w, u, G, path, tok0, np, HV, hv, K, V, v0, g_last);
  __syncthreads();

  float* S = state + (((int64_t)state_idx[b] * HV + hv) * (int64_t)V) * K;
  update_state_tile(S, S, kn, us, w, np, K, v0, min(kVTile, V - v0), triton_exp(g_last), vec);
}

// ---------------------------------------------------------------------------------------------
// The engine's commit (gdn_tree_triton.py::_tree_gdn_commit_from_x_kernel) in CUDA: every layer of
// a run in one launch, each path node's key recomputed from the layer's pre-conv inputs x (the
// verify keeps no keys): the depthwise causal conv along the accepted path (above the root it
// reads the request's committed conv window, newest column first), each product rounded to its
// operands' promoted dtype as sglang's conv does (PX: x * weight, PS: conv state * weight), plus
// bias, SiLU, rounded to x's dtype, L2-normalised (eps 1e-6). Only the path's nodes (t <= n_acc)
// are formed. dst_idx (optional): write into slot dst_idx[b] instead (-1: skip the request).
//
// Grid (bs * HV, ceil(V / kVTile), L); block 256 threads, first over every (path node, key
// channel) pair, then a warp per node (norms), then over the state tile. Shared memory: keys
// [P, K], values [P, kVTile], weights [P].

__device__ __forceinline__ float round_bf16(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

template <typename XT, typename CT>
__global__ void gdn_tree_commit_from_x_kernel(
    float* __restrict__ state, const int32_t* __restrict__ state_idx, const float* __restrict__ u,
    const float* __restrict__ G, const XT* __restrict__ x, const int64_t* __restrict__ w_tab,
    const int64_t* __restrict__ b_tab, const CT* __restrict__ conv_state, const int32_t* __restrict__ accepted,
    const int32_t* __restrict__ accept_len, const int32_t* __restrict__ dst_idx, int N, int C, int k_off,
    int64_t s_slot, int64_t s_c, int64_t s_w, int64_t l_state, int64_t l_u, int64_t l_g, int64_t l_x,
    int64_t l_conv, int H, int HV, int K, int V, int KW, int P, bool vec) {
  // Products round to the promoted dtype of their operands (the weights have x's dtype): x *
  // weight to bf16 when x is bf16; conv state * weight to bf16 when both are bf16.
  constexpr bool kRoundX = std::is_same<XT, __nv_bfloat16>::value;
  constexpr bool kRoundS = kRoundX && std::is_same<CT, __nv_bfloat16>::value;
  extern __shared__ float smem[];
  float* kn = smem;                    // [P, K]
  float* us = kn + (size_t)P * K;      // [P, kVTile]
  float* w = us + (size_t)P * kVTile;  // [P]

  const int b = blockIdx.x / HV, hv = blockIdx.x % HV, h = hv / (HV / H);
  const int64_t layer = blockIdx.z;
  const int64_t dst = dst_idx != nullptr ? (int64_t)dst_idx[b] : (int64_t)state_idx[b];
  if (dst < 0) return;
  state += layer * l_state;
  u += layer * l_u;
  G += layer * l_g;
  x += layer * l_x;
  conv_state += layer * l_conv;
  const XT* wt = reinterpret_cast<const XT*>(w_tab[layer]);
  const XT* bias = b_tab != nullptr ? reinterpret_cast<const XT*>(b_tab[layer]) : nullptr;

  const int v0 = blockIdx.y * kVTile;
  const int np = min(accept_len[b] + 1, P);  // path nodes, root included
  const int32_t* path = accepted + (size_t)b * P;
  const int64_t tok0 = (int64_t)b * N;
  const int64_t slot = state_idx[b];
  const float g_last = G[(tok0 + path[np - 1]) * HV + hv];

  for (int e = threadIdx.x; e < np * K; e += kThreads) {  // every (node, channel) at once
    const int t = e / K, i = e - t * K;
    const int ch = k_off + h * K + i;
    float acc = bias != nullptr ? to_f(bias[ch]) : 0.f;
    for (int j = 0; j < KW; ++j) {  // tap j (0 = the node) is path index t - j
      const int src_t = t - j;
      const float wc = to_f(wt[(int64_t)ch * KW + (KW - 1 - j)]);
      if (src_t >= 0) {
        const float pr = to_f(x[(tok0 + path[src_t]) * C + ch]) * wc;
        acc += kRoundX ? round_bf16(pr) : pr;
      } else if (KW - 1 + src_t >= 0) {
        const float pr = to_f(conv_state[slot * s_slot + ch * s_c + (int64_t)(KW - 1 + src_t) * s_w]) * wc;
        acc += kRoundS ? round_bf16(pr) : pr;
      }
    }
    acc = triton_div(acc, 1.f + triton_exp(-acc));  // SiLU
    kn[e] = kRoundX ? round_bf16(acc) : acc;          // the key in x's dtype, as the verify had it
  }
  __syncthreads();
  finish_path_nodes(kn, us, w, u, G, path, tok0, np, HV, hv, K, V, v0, g_last);
  __syncthreads();

  update_state_tile(state + ((slot * HV + hv) * (int64_t)V) * K, state + ((dst * HV + hv) * (int64_t)V) * K, kn, us,
                    w, np, K, v0, min(kVTile, V - v0), triton_exp(g_last), vec);
}

template <typename XT, typename CT>
cudaError_t launch_from_x(dim3 grid, size_t shm, cudaStream_t stream, float* state, const int32_t* state_idx,
                          const float* u, const float* G, const void* x, const int64_t* w_tab, const int64_t* b_tab,
                          const void* conv_state, const int32_t* accepted, const int32_t* accept_len,
                          const int32_t* dst_idx, int N, int C, int k_off, int64_t s_slot, int64_t s_c, int64_t s_w,
                          int64_t l_state, int64_t l_u, int64_t l_g, int64_t l_x, int64_t l_conv, int H, int HV,
                          int K, int V, int KW, int P, bool vec) {
  gdn_tree_commit_from_x_kernel<XT, CT><<<grid, kThreads, shm, stream>>>(
      state, state_idx, u, G, static_cast<const XT*>(x), w_tab, b_tab, static_cast<const CT*>(conv_state), accepted,
      accept_len, dst_idx, N, C, k_off, s_slot, s_c, s_w, l_state, l_u, l_g, l_x, l_conv, H, HV, K, V, KW, P, vec);
  return cudaGetLastError();
}

// Both commit kernels' launch: shared memory for keys [P, K], values [P, kVTile] and weights [P],
// and whether the state moves as float4 (K % 4 == 0 and the pool 16-byte aligned: every row
// offset is then a multiple of four floats).
size_t commit_smem_bytes(int P, int K) { return sizeof(float) * ((size_t)P * K + (size_t)P * kVTile + P); }
bool commit_vectorized(const float* state, int K) {
  return K % 4 == 0 && reinterpret_cast<uintptr_t>(state) % 16 == 0;
}

}  // namespace

extern "C" cudaError_t ddtree_gdn_tree_commit_from_x(
    float* state, const int32_t* state_idx, const float* u, const float* G, const void* x, int x_is_bf16,
    const int64_t* w_tab, const int64_t* b_tab, const void* conv_state, int conv_is_bf16, const int32_t* accepted,
    const int32_t* accept_len, const int32_t* dst_idx, int L, int bs, int N, int C, int k_off, int64_t s_slot,
    int64_t s_c, int64_t s_w, int64_t l_state, int64_t l_u, int64_t l_g, int64_t l_x, int64_t l_conv, int H, int HV,
    int K, int V, int KW, int P, cudaStream_t stream) {
  if (bs == 0 || L == 0) return cudaSuccess;
  dim3 grid(bs * HV, (V + kVTile - 1) / kVTile, L);
  const size_t shm = commit_smem_bytes(P, K);
  if (shm > 48 * 1024) return cudaErrorInvalidValue;  // P * K too large for one block's shared memory
  const bool vec = commit_vectorized(state, K);
#define DDTREE_FROM_X(XT, CT)                                                                                      \
  return launch_from_x<XT, CT>(grid, shm, stream, state, state_idx, u, G, x, w_tab, b_tab, conv_state, accepted,     \
                               accept_len, dst_idx, N, C, k_off, s_slot, s_c, s_w, l_state, l_u, l_g, l_x, l_conv, H, \
                               HV, K, V, KW, P, vec)
  if (x_is_bf16 && conv_is_bf16) DDTREE_FROM_X(__nv_bfloat16, __nv_bfloat16);
  if (x_is_bf16) DDTREE_FROM_X(__nv_bfloat16, float);
  if (conv_is_bf16) DDTREE_FROM_X(float, __nv_bfloat16);
  DDTREE_FROM_X(float, float);
#undef DDTREE_FROM_X
}

extern "C" cudaError_t ddtree_gdn_tree_commit(float* state, const int32_t* state_idx, const float* u,
                                              const float* G, const void* k, int k_is_bf16,
                                              const int32_t* accepted, const int32_t* accept_len, int bs,
                                              int N, int H, int HV, int K, int V, int P,
                                              cudaStream_t stream) {
  if (bs == 0) return cudaSuccess;
  dim3 grid(bs * HV, (V + kVTile - 1) / kVTile);
  const size_t shm = commit_smem_bytes(P, K);
  if (shm > 48 * 1024) return cudaErrorInvalidValue;  // P * K too large for one block's shared memory
  const bool vec = commit_vectorized(state, K);
  if (k_is_bf16) {
    gdn_tree_commit_kernel<__nv_bfloat16><<<grid, kThreads, shm, stream>>>(
        state, state_idx, u, G, static_cast<const __nv_bfloat16*>(k), accepted, accept_len, N, H, HV, K, V, P, vec);
  } else {
    gdn_tree_commit_kernel<float><<<grid, kThreads, shm, stream>>>(
        state, state_idx, u, G, static_cast<const float*>(k), accepted, accept_len, N, H, HV, K, V, P, vec);
  }
  return cudaGetLastError();
}
