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

namespace {

constexpr int kVTile = 32;
constexpr int kThreads = 256;

template <typename KT>
__device__ __forceinline__ float to_f(KT x);
template <>
__device__ __forceinline__ float to_f<float>(float x) { return x; }
template <>
__device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename KT>
__global__ void gdn_tree_commit_kernel(float* __restrict__ state, const int32_t* __restrict__ state_idx,
                                       const float* __restrict__ u, const float* __restrict__ G,
                                       const KT* __restrict__ k, const int32_t* __restrict__ accepted,
                                       const int32_t* __restrict__ accept_len, int N, int H, int HV, int K,
                                       int V, int P) {
  extern __shared__ float smem[];
  float* kn = smem;                    // [P, K]
  float* us = kn + (size_t)P * K;      // [P, kVTile]
  float* w = us + (size_t)P * kVTile;  // [P]

  const int b = blockIdx.x / HV, hv = blockIdx.x % HV, h = hv / (HV / H);
  const int v0 = blockIdx.y * kVTile;
  const int n_acc = accept_len[b];
  const int np = min(n_acc + 1, P);
  const int last = accepted[(size_t)b * P + np - 1];
  const int64_t tok0 = (int64_t)b * N;
  const float g_last = G[(tok0 + last) * HV + hv];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nwarps = kThreads / 32;
  for (int t = warp; t < np; t += nwarps) {
    const int node = accepted[(size_t)b * P + t];
    const KT* kr = k + ((tok0 + node) * H + h) * (int64_t)K;
    float ss = 0.f;
    for (int i = lane; i < K; i += 32) {
      const float x = to_f(kr[i]);
      kn[(size_t)t * K + i] = x;
      ss += x * x;
    }
    for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
    const float inv = rsqrtf(ss + 1e-6f);
    for (int i = lane; i < K; i += 32) kn[(size_t)t * K + i] *= inv;
    if (lane < kVTile) {
      const int vv = v0 + lane;
      us[t * kVTile + lane] = vv < V ? u[((tok0 + node) * HV + hv) * (int64_t)V + vv] : 0.f;
    }
    if (lane == 0) w[t] = __expf(g_last - G[(tok0 + node) * HV + hv]);
  }
  __syncthreads();

  const int64_t slot = state_idx[b];
  float* S = state + ((slot * HV + hv) * (int64_t)V) * K;
  const float a_last = __expf(g_last);
  const int vmax = min(kVTile, V - v0);
  for (int e = threadIdx.x; e < vmax * K; e += kThreads) {
    const int vv = e / K, kk = e % K;
    float acc = a_last * S[(int64_t)(v0 + vv) * K + kk];
    for (int t = 0; t < np; ++t) acc += w[t] * kn[(size_t)t * K + kk] * us[t * kVTile + vv];
    S[(int64_t)(v0 + vv) * K + kk] = acc;
  }
}

}  // namespace

extern "C" cudaError_t ddtree_gdn_tree_commit(float* state, const int32_t* state_idx, const float* u,
                                              const float* G, const void* k, int k_is_bf16,
                                              const int32_t* accepted, const int32_t* accept_len, int bs,
                                              int N, int H, int HV, int K, int V, int P,
                                              cudaStream_t stream) {
  if (bs == 0) return cudaSuccess;
  dim3 grid(bs * HV, (V + kVTile - 1) / kVTile);
  const size_t shm = sizeof(float) * ((size_t)P * K + (size_t)P * kVTile + P);
  if (shm > 48 * 1024) return cudaErrorInvalidValue;  // P * K too large for one block's shared memory
  if (k_is_bf16) {
    gdn_tree_commit_kernel<__nv_bfloat16><<<grid, kThreads, shm, stream>>>(
        state, state_idx, u, G, static_cast<const __nv_bfloat16*>(k), accepted, accept_len, N, H, HV, K, V, P);
  } else {
    gdn_tree_commit_kernel<float><<<grid, kThreads, shm, stream>>>(
        state, state_idx, u, G, static_cast<const float*>(k), accepted, accept_len, N, H, HV, K, V, P);
  }
  return cudaGetLastError();
}
