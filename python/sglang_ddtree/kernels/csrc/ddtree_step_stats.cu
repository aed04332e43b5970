// DDTree per-step statistics in one launch: the server's counters (accept length and tree depth
// histograms, tree nodes), the DFLASH chain's shadow accept length, and budget auto's
// acceptance sums. One thread per request; every sum is an atomic add of integers (the float64
// sums hold integers, so the order of the adds does not change them).
//
// The same results as, in order, sglang_ddtree.metrics.DDTreeStats.record,
// core.shadow_chain.shadow_chain_accept + DDTreeStats.record_shadow, and
// core.budget_policy.BudgetPolicy.record's device sums (test/core/test_gpu.py checks each).
//
// Shapes (int64, contiguous unless said):
//   accepted [bs, T] verify positions of the accepted path (root first, -1 padded)
//   accept_len [bs]; depth [bs, M] tree node depths (<= 0: no node)
//   rank [bs, M] tree node ranks (node i is verify position i + 1); null: no shadow
//   chain [bs, Lc] rank-0 candidate per depth, strides (s_b, s_d) in elements; bonus [bs]
//   accept_hist, depth_hist, shadow_hist [hist_max + 1]; nodes, shadow_censored [1]
//   shadow_out [bs] (null: not written), censored_out [bs] u8 (null: not written)
//   sums [C] f64 (null: no policy), budgets [known]
#include <cuda_runtime.h>
#include <stdint.h>

namespace ddtree {

__device__ __forceinline__ void add_i64(int64_t* p, int64_t v) {
  atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
}

__device__ __forceinline__ int64_t clamp_i64(int64_t v, int64_t lo, int64_t hi) {
  return v < lo ? lo : (v > hi ? hi : v);
}

__global__ void step_stats_kernel(
    const int64_t* __restrict__ accepted, const int64_t* __restrict__ accept_len,
    const int64_t* __restrict__ depth, const int64_t* __restrict__ rank,
    const int64_t* __restrict__ chain, int64_t chain_sb, int64_t chain_sd, int Lc,
    const int64_t* __restrict__ bonus, int shadow_depth, int bs, int T, int M, int hist_max,
    int64_t* __restrict__ accept_hist, int64_t* __restrict__ depth_hist, int64_t* __restrict__ nodes,
    int64_t* __restrict__ shadow_hist, int64_t* __restrict__ shadow_censored,
    int64_t* __restrict__ shadow_out, uint8_t* __restrict__ censored_out,
    double* __restrict__ sums, const int64_t* __restrict__ budgets, int known, int off,
    int chain_sum) {
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= bs) return;
  const int64_t a = accept_len[b];
  const int64_t* acc = accepted + (int64_t)b * T;

  // The server's counters.
  add_i64(accept_hist + clamp_i64(a, 0, hist_max), 1);
  const int64_t* dp = depth + (int64_t)b * M;
  int64_t deepest = 0, count = 0;
  for (int i = 0; i < M; ++i) {
    const int64_t d = dp[i];
    if (d > 0) ++count;
    if (d > deepest) deepest = d;
  }
  add_i64(depth_hist + clamp_i64(deepest, 0, hist_max), 1);
  add_i64(nodes, count);

  // The chain's accept length: the leading run of rank-0 nodes on the accepted path, one more
  // when the whole path is chain and the chain's next draft equals the bonus token (censored:
  // what follows is unknown).
  int64_t run = 0;
  if (rank != nullptr) {
    const int64_t* rk = rank + (int64_t)b * M;
    for (int64_t t = 1; t <= a && t < T; ++t) {
      const int64_t p = acc[t];
      if (p < 1 || rk[p - 1] != 0) break;
      ++run;
    }
    const int64_t lim = shadow_depth < Lc ? shadow_depth : Lc;
    const int64_t nd = a < Lc - 1 ? a : Lc - 1;
    const bool one_more = run == a && a < lim && chain[(int64_t)b * chain_sb + nd * chain_sd] == bonus[b];
    if (one_more) ++run;
    const bool censored = one_more && run < shadow_depth;
    if (shadow_out != nullptr) shadow_out[b] = run;
    if (censored_out != nullptr) censored_out[b] = censored ? 1 : 0;
    if (shadow_hist != nullptr) {
      add_i64(shadow_hist + clamp_i64(run, 0, hist_max), 1);
      if (censored) add_i64(shadow_censored, 1);
    }
  }

  // Budget auto: accepted drafts of every budget up to the verified one (the budget-B tree is
  // positions 1..B), and the chain's (its own accept length on a chain step, else the shadow's).
  if (sums != nullptr) {
    for (int i = 0; i < known; ++i) {
      const int64_t lim = budgets[i];
      int64_t inside = 0;
      for (int64_t t = 1; t <= a && t < T; ++t) inside += acc[t] <= lim ? 1 : 0;
      atomicAdd(sums + off + i, (double)inside);
    }
    if (chain_sum == 1) atomicAdd(sums, (double)a);
    if (chain_sum == 2) atomicAdd(sums, (double)run);
  }
}

}  // namespace ddtree

extern "C" {

cudaError_t ddtree_step_stats(
    const int64_t* accepted, const int64_t* accept_len, const int64_t* depth, const int64_t* rank,
    const int64_t* chain, int64_t chain_sb, int64_t chain_sd, int Lc, const int64_t* bonus,
    int shadow_depth, int bs, int T, int M, int hist_max, int64_t* accept_hist, int64_t* depth_hist,
    int64_t* nodes, int64_t* shadow_hist, int64_t* shadow_censored, int64_t* shadow_out,
    uint8_t* censored_out, double* sums, const int64_t* budgets, int known, int off, int chain_sum,
    cudaStream_t stream) {
  if (bs == 0) return cudaSuccess;
  const int threads = 128;
  ddtree::step_stats_kernel<<<(bs + threads - 1) / threads, threads, 0, stream>>>(
      accepted, accept_len, depth, rank, chain, chain_sb, chain_sd, Lc, bonus, shadow_depth, bs, T, M,
      hist_max, accept_hist, depth_hist, nodes, shadow_hist, shadow_censored, shadow_out, censored_out,
      sums, budgets, known, off, chain_sum);
  return cudaGetLastError();
}

}  // extern "C"
