// Torch bindings for the DDTree tree kernels (ddtree_tree.cu). Shapes/dtypes are checked here
// so a wrong call fails with a message instead of reading out of bounds.
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

extern "C" {
cudaError_t ddtree_build_tree_layout(
    const float*, const int64_t*, const int64_t*, const int64_t*, int, int, int, int, int, int,
    int64_t*, int64_t*, int64_t*, int64_t*, float*, int64_t*, int64_t*, int64_t*, int64_t*,
    int64_t*, int64_t*, uint8_t*, cudaStream_t);
cudaError_t ddtree_tree_walk(const int64_t*, const int64_t*, const int64_t*, const int64_t*, int,
                             int, int, int64_t*, int64_t*, int64_t*, cudaStream_t);
cudaError_t ddtree_step_stats(const int64_t*, const int64_t*, const int64_t*, const int64_t*, const int64_t*,
                              int64_t, int64_t, int, const int64_t*, int, int, int, int, int, int64_t*,
                              int64_t*, int64_t*, int64_t*, int64_t*, int64_t*, uint8_t*, double*,
                              const int64_t*, int, int, int, cudaStream_t);
cudaError_t ddtree_gdn_tree_commit(float*, const int32_t*, const float*, const float*, const void*,
                                   int, const int32_t*, const int32_t*, int, int, int, int, int, int,
                                   int, cudaStream_t);
cudaError_t ddtree_gdn_tree_commit_from_x(float*, const int32_t*, const float*, const float*, const void*, int,
                                          const int64_t*, const int64_t*, const void*, int, const int32_t*,
                                          const int32_t*, const int32_t*, int, int, int, int, int, int64_t, int64_t,
                                          int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, int, int,
                                          int, int, cudaStream_t);
}

static void check(const torch::Tensor& t, torch::ScalarType dt, int dim, const char* name) {
  TORCH_CHECK(t.is_cuda(), name, " must be a CUDA tensor");
  TORCH_CHECK(t.scalar_type() == dt, name, " has the wrong dtype");
  TORCH_CHECK(t.dim() == dim, name, " must have ", dim, " dims");
  TORCH_CHECK(t.is_contiguous(), name, " must be contiguous");
}

std::vector<torch::Tensor> build_tree_layout(torch::Tensor lp, torch::Tensor ids, torch::Tensor root,
                                             torch::Tensor prefix, int64_t B, int64_t l_eff,
                                             int64_t k_eff) {
  check(lp, torch::kFloat32, 3, "lp");
  check(ids, torch::kInt64, 3, "ids");
  check(root, torch::kInt64, 1, "root");
  check(prefix, torch::kInt64, 1, "prefix");
  const int64_t bs = lp.size(0), L = lp.size(1), K = lp.size(2), n = B + 1;
  TORCH_CHECK(ids.sizes() == lp.sizes(), "ids must match lp");
  TORCH_CHECK(root.size(0) == bs && prefix.size(0) == bs, "root/prefix must be [bs]");
  TORCH_CHECK(B >= 0 && B <= 4096, "budget must be in 0..4096");
  TORCH_CHECK(l_eff >= 0 && l_eff <= L && k_eff >= 0 && k_eff <= K, "caps out of range");
  auto o64 = lp.options().dtype(torch::kInt64);
  auto t_depth = torch::empty({bs, B}, o64), t_parent = torch::empty({bs, B}, o64);
  auto t_rank = torch::empty({bs, B}, o64), t_token = torch::empty({bs, B}, o64);
  auto t_score = torch::empty({bs, B}, lp.options());
  auto y_tokens = torch::empty({bs, n}, o64), y_depth = torch::empty({bs, n}, o64);
  auto y_pos = torch::empty({bs, n}, o64), y_parent = torch::empty({bs, n}, o64);
  auto y_first = torch::empty({bs, n}, o64), y_next = torch::empty({bs, n}, o64);
  auto y_mask = torch::empty({bs, n, n}, lp.options().dtype(torch::kBool));
  auto stream = c10::cuda::getCurrentCUDAStream();
  cudaError_t err = ddtree_build_tree_layout(
      lp.data_ptr<float>(), ids.data_ptr<int64_t>(), root.data_ptr<int64_t>(),
      prefix.data_ptr<int64_t>(), (int)bs, (int)L, (int)K, (int)B, (int)l_eff, (int)k_eff,
      t_depth.data_ptr<int64_t>(), t_parent.data_ptr<int64_t>(), t_rank.data_ptr<int64_t>(),
      t_token.data_ptr<int64_t>(), t_score.data_ptr<float>(), y_tokens.data_ptr<int64_t>(),
      y_depth.data_ptr<int64_t>(), y_pos.data_ptr<int64_t>(), y_parent.data_ptr<int64_t>(),
      y_first.data_ptr<int64_t>(), y_next.data_ptr<int64_t>(),
      reinterpret_cast<uint8_t*>(y_mask.data_ptr<bool>()), stream);
  TORCH_CHECK(err == cudaSuccess, "ddtree_build_tree_layout: ", cudaGetErrorString(err));
  return {t_depth, t_parent, t_rank, t_token, t_score, y_tokens, y_depth, y_pos,
          y_parent, y_first, y_next, y_mask};
}

std::vector<torch::Tensor> tree_walk(torch::Tensor tokens, torch::Tensor first, torch::Tensor next,
                                     torch::Tensor target, int64_t L) {
  for (auto* p : {&tokens, &first, &next, &target}) check(*p, torch::kInt64, 2, "walk input");
  const int64_t bs = tokens.size(0), n = tokens.size(1);
  TORCH_CHECK(first.sizes() == tokens.sizes() && next.sizes() == tokens.sizes() &&
                  target.sizes() == tokens.sizes(), "walk inputs must all be [bs, n]");
  auto o64 = tokens.options();
  auto accepted = torch::empty({bs, L + 1}, o64), accept_len = torch::empty({bs}, o64);
  auto new_tokens = torch::empty({bs, L + 1}, o64);
  cudaError_t err = ddtree_tree_walk(
      tokens.data_ptr<int64_t>(), first.data_ptr<int64_t>(), next.data_ptr<int64_t>(),
      target.data_ptr<int64_t>(), (int)bs, (int)n, (int)L, accepted.data_ptr<int64_t>(),
      accept_len.data_ptr<int64_t>(), new_tokens.data_ptr<int64_t>(),
      c10::cuda::getCurrentCUDAStream());
  TORCH_CHECK(err == cudaSuccess, "ddtree_tree_walk: ", cudaGetErrorString(err));
  return {accepted, accept_len, new_tokens};
}

static const int64_t* opt_ptr(const c10::optional<torch::Tensor>& t) {
  return t.has_value() ? t->data_ptr<int64_t>() : nullptr;
}

// In place: one step's counters, shadow chain and budget-auto sums (ddtree_step_stats.cu).
// shadow: (rank [bs, M], chain [bs, Lc] (any strides), bonus [bs], shadow_out [bs] i64,
// censored_out [bs] bool) all given or all absent; shadow_hist / shadow_censored with them or
// absent; sums [C] f64 with budgets [known] (chain_sum: 0 none, 1 accept length, 2 shadow).
void step_stats(torch::Tensor accepted, torch::Tensor accept_len, torch::Tensor depth, int64_t hist_max,
                torch::Tensor accept_hist, torch::Tensor depth_hist, torch::Tensor nodes,
                c10::optional<torch::Tensor> rank, c10::optional<torch::Tensor> chain,
                c10::optional<torch::Tensor> bonus, int64_t shadow_depth, c10::optional<torch::Tensor> shadow_out,
                c10::optional<torch::Tensor> censored_out, c10::optional<torch::Tensor> shadow_hist,
                c10::optional<torch::Tensor> shadow_censored, c10::optional<torch::Tensor> sums,
                c10::optional<torch::Tensor> budgets, int64_t off, int64_t chain_sum) {
  check(accepted, torch::kInt64, 2, "accepted [bs, T]");
  check(accept_len, torch::kInt64, 1, "accept_len [bs]");
  check(depth, torch::kInt64, 2, "depth [bs, M]");
  const int64_t bs = accepted.size(0), T = accepted.size(1), M = depth.size(1);
  TORCH_CHECK(accept_len.size(0) == bs && depth.size(0) == bs, "batch mismatch");
  TORCH_CHECK(hist_max >= 0, "hist_max must be >= 0");
  for (auto* h : {&accept_hist, &depth_hist}) {
    check(*h, torch::kInt64, 1, "histogram");
    TORCH_CHECK(h->size(0) == hist_max + 1, "histograms must have hist_max + 1 bins");
  }
  check(nodes, torch::kInt64, 0, "nodes []");
  const bool shadow = rank.has_value();
  TORCH_CHECK(chain.has_value() == shadow && bonus.has_value() == shadow && shadow_out.has_value() == shadow &&
                  censored_out.has_value() == shadow,
              "rank, chain, bonus, shadow_out and censored_out go together");
  TORCH_CHECK(shadow_hist.has_value() == shadow_censored.has_value() && (shadow || !shadow_hist.has_value()),
              "shadow_hist and shadow_censored go together, and with the shadow's inputs");
  int64_t Lc = 0, sb = 0, sd = 0;
  uint8_t* cens = nullptr;
  if (shadow) {
    check(*rank, torch::kInt64, 2, "rank [bs, M]");
    TORCH_CHECK(rank->size(0) == bs && rank->size(1) == M, "rank must be [bs, M] like depth");
    TORCH_CHECK(chain->is_cuda() && chain->scalar_type() == torch::kInt64 && chain->dim() == 2 &&
                    chain->size(0) == bs && chain->size(1) >= 1, "chain must be an int64 CUDA [bs, Lc >= 1]");
    check(*bonus, torch::kInt64, 1, "bonus [bs]");
    check(*shadow_out, torch::kInt64, 1, "shadow_out [bs]");
    check(*censored_out, torch::kBool, 1, "censored_out [bs]");
    TORCH_CHECK(bonus->size(0) == bs && shadow_out->size(0) == bs && censored_out->size(0) == bs, "batch mismatch");
    TORCH_CHECK(shadow_depth >= 0, "shadow_depth must be >= 0");
    Lc = chain->size(1), sb = chain->stride(0), sd = chain->stride(1);
    cens = reinterpret_cast<uint8_t*>(censored_out->data_ptr<bool>());
    if (shadow_hist.has_value()) {
      check(*shadow_hist, torch::kInt64, 1, "shadow_hist");
      TORCH_CHECK(shadow_hist->size(0) == hist_max + 1, "shadow_hist must have hist_max + 1 bins");
      check(*shadow_censored, torch::kInt64, 0, "shadow_censored []");
    }
  }
  TORCH_CHECK(sums.has_value() == budgets.has_value(), "sums and budgets go together");
  int64_t known = 0;
  if (sums.has_value()) {
    check(*sums, torch::kFloat64, 1, "sums [C]");
    check(*budgets, torch::kInt64, 1, "budgets [known]");
    known = budgets->size(0);
    TORCH_CHECK(off >= 0 && off + known <= sums->size(0), "budget sums out of range");
    TORCH_CHECK(chain_sum >= 0 && chain_sum <= 2, "chain_sum must be 0, 1 or 2");
    TORCH_CHECK(chain_sum != 2 || shadow, "chain_sum 2 needs the shadow's inputs");
    TORCH_CHECK(chain_sum == 0 || sums->size(0) >= 1, "no chain slot");
  }
  cudaError_t err = ddtree_step_stats(
      accepted.data_ptr<int64_t>(), accept_len.data_ptr<int64_t>(), depth.data_ptr<int64_t>(), opt_ptr(rank),
      shadow ? chain->data_ptr<int64_t>() : nullptr, sb, sd, (int)Lc, opt_ptr(bonus), (int)shadow_depth, (int)bs,
      (int)T, (int)M, (int)hist_max, accept_hist.data_ptr<int64_t>(), depth_hist.data_ptr<int64_t>(),
      nodes.data_ptr<int64_t>(), shadow_hist.has_value() ? shadow_hist->data_ptr<int64_t>() : nullptr,
      shadow_censored.has_value() ? shadow_censored->data_ptr<int64_t>() : nullptr,
      shadow ? shadow_out->data_ptr<int64_t>() : nullptr, cens,
      sums.has_value() ? sums->data_ptr<double>() : nullptr, opt_ptr(budgets), (int)known, (int)off,
      sums.has_value() ? (int)chain_sum : 0, c10::cuda::getCurrentCUDAStream());
  TORCH_CHECK(err == cudaSuccess, "ddtree_step_stats: ", cudaGetErrorString(err));
}

// In place: state[state_idx[b]] <- the accepted node's GDN state (ddtree_gdn_commit.cu).
void gdn_tree_commit(torch::Tensor state, torch::Tensor state_idx, torch::Tensor u, torch::Tensor G,
                     torch::Tensor k, torch::Tensor accepted, torch::Tensor accept_len) {
  check(state, torch::kFloat32, 4, "state [slots, HV, V, K]");
  check(state_idx, torch::kInt32, 1, "state_idx");
  check(u, torch::kFloat32, 4, "u [bs, N, HV, V]");
  check(G, torch::kFloat32, 3, "G [bs, N, HV]");
  TORCH_CHECK(k.is_cuda() && k.is_contiguous() && k.dim() == 3, "k must be a contiguous CUDA [T, H, K]");
  TORCH_CHECK(k.scalar_type() == torch::kBFloat16 || k.scalar_type() == torch::kFloat32, "k must be bf16 or fp32");
  check(accepted, torch::kInt32, 2, "accepted [bs, P]");
  check(accept_len, torch::kInt32, 1, "accept_len");
  const int64_t bs = u.size(0), N = u.size(1), HV = u.size(2), V = u.size(3);
  const int64_t H = k.size(1), K = k.size(2), P = accepted.size(1);
  TORCH_CHECK(k.size(0) == bs * N, "k must have bs * N tokens");
  TORCH_CHECK(state.size(1) == HV && state.size(2) == V && state.size(3) == K, "state must be [slots, HV, V, K]");
  TORCH_CHECK(HV % H == 0, "value heads must be a multiple of key heads");
  TORCH_CHECK(G.size(0) == bs && G.size(1) == N && G.size(2) == HV, "G must be [bs, N, HV]");
  TORCH_CHECK(state_idx.size(0) == bs && accept_len.size(0) == bs && accepted.size(0) == bs, "batch mismatch");
  cudaError_t err = ddtree_gdn_tree_commit(
      state.data_ptr<float>(), state_idx.data_ptr<int32_t>(), u.data_ptr<float>(), G.data_ptr<float>(),
      k.data_ptr(), k.scalar_type() == torch::kBFloat16, accepted.data_ptr<int32_t>(),
      accept_len.data_ptr<int32_t>(), (int)bs, (int)N, (int)H, (int)HV, (int)K, (int)V, (int)P,
      c10::cuda::getCurrentCUDAStream());
  TORCH_CHECK(err == cudaSuccess, "ddtree_gdn_tree_commit: ", cudaGetErrorString(err));
}

// In place, every layer of a run in one launch: the engine's commit with keys recomputed from the
// pre-conv inputs (ddtree_gdn_commit.cu). Layer strides come from the caller, which checks that
// each layer is contiguous (gdn_tree_triton._layer_stride); shapes and dtypes are checked here.
void gdn_tree_commit_from_x_layers(torch::Tensor state, torch::Tensor state_idx, torch::Tensor u, torch::Tensor G,
                                   torch::Tensor x, torch::Tensor w_tab, c10::optional<torch::Tensor> b_tab,
                                   torch::Tensor conv_state, torch::Tensor accepted, torch::Tensor accept_len,
                                   c10::optional<torch::Tensor> dst_idx, int64_t k_off, int64_t H, int64_t l_state,
                                   int64_t l_u, int64_t l_g, int64_t l_x, int64_t l_conv) {
  for (auto* t : {&state, &u, &G}) {
    TORCH_CHECK(t->is_cuda() && t->scalar_type() == torch::kFloat32, "state, u and G must be float32 CUDA tensors");
  }
  TORCH_CHECK(state.dim() == 5 && u.dim() == 5 && G.dim() == 4 && x.dim() == 3 && conv_state.dim() == 4,
              "expected state [L, slots, HV, V, K], u [L, bs, N, HV, V], G [L, bs, N, HV], x [L, T, C], "
              "conv_state [L, slots, C, W-1]");
  TORCH_CHECK(x.is_cuda() && (x.scalar_type() == torch::kBFloat16 || x.scalar_type() == torch::kFloat32),
              "x must be a bf16 or float32 CUDA tensor");
  TORCH_CHECK(conv_state.is_cuda() &&
                  (conv_state.scalar_type() == torch::kBFloat16 || conv_state.scalar_type() == torch::kFloat32),
              "conv_state must be a bf16 or float32 CUDA tensor");
  check(state_idx, torch::kInt32, 1, "state_idx");
  check(accepted, torch::kInt32, 2, "accepted [bs, P]");
  check(accept_len, torch::kInt32, 1, "accept_len");
  check(w_tab, torch::kInt64, 1, "w_tab");
  const int64_t L = u.size(0), bs = u.size(1), N = u.size(2), HV = u.size(3), V = u.size(4);
  const int64_t K = state.size(4), T = x.size(1), C = x.size(2), KW = conv_state.size(3) + 1;
  TORCH_CHECK(state.size(0) == L && G.size(0) == L && x.size(0) == L && conv_state.size(0) == L && w_tab.size(0) == L,
              "every tensor must have the same number of layers");
  TORCH_CHECK(state.size(2) == HV && state.size(3) == V, "state must be [L, slots, HV, V, K]");
  TORCH_CHECK(G.size(1) == bs && G.size(2) == N && G.size(3) == HV, "G must be [L, bs, N, HV]");
  TORCH_CHECK(T >= bs * N && conv_state.size(2) == C, "x must be [L, >= bs * N, C] and conv_state [L, slots, C, W-1]");
  TORCH_CHECK(H > 0 && HV % H == 0 && k_off >= 0 && k_off + H * K <= C, "key channels out of range");
  TORCH_CHECK(state_idx.size(0) >= bs && accept_len.size(0) == bs && accepted.size(0) == bs, "batch mismatch");
  const int32_t* dst = nullptr;
  if (dst_idx.has_value()) {
    check(*dst_idx, torch::kInt32, 1, "dst_idx");
    TORCH_CHECK(dst_idx->size(0) >= bs, "dst_idx must have one slot per request");
    dst = dst_idx->data_ptr<int32_t>();
  }
  const int64_t* bt = nullptr;
  if (b_tab.has_value()) {
    check(*b_tab, torch::kInt64, 1, "b_tab");
    TORCH_CHECK(b_tab->size(0) == L, "b_tab must have one address per layer");
    bt = b_tab->data_ptr<int64_t>();
  }
  cudaError_t err = ddtree_gdn_tree_commit_from_x(
      state.data_ptr<float>(), state_idx.data_ptr<int32_t>(), u.data_ptr<float>(), G.data_ptr<float>(),
      x.data_ptr(), x.scalar_type() == torch::kBFloat16, w_tab.data_ptr<int64_t>(), bt, conv_state.data_ptr(),
      conv_state.scalar_type() == torch::kBFloat16, accepted.data_ptr<int32_t>(), accept_len.data_ptr<int32_t>(),
      dst, (int)L, (int)bs, (int)N, (int)C, (int)k_off, conv_state.stride(1), conv_state.stride(2),
      conv_state.stride(3), l_state, l_u, l_g, l_x, l_conv, (int)H, (int)HV, (int)K, (int)V, (int)KW,
      (int)accepted.size(1), c10::cuda::getCurrentCUDAStream());
  TORCH_CHECK(err == cudaSuccess, "ddtree_gdn_tree_commit_from_x: ", cudaGetErrorString(err));
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("gdn_tree_commit_from_x_layers", &gdn_tree_commit_from_x_layers,
        "DDTree tree-GDN state commit from the pre-conv inputs, every layer of a run in one launch (in place)");
  m.def("gdn_tree_commit", &gdn_tree_commit, "DDTree tree-GDN state commit (in place)");
  m.def("build_tree_layout", &build_tree_layout, "DDTree best-first tree + verify layout");
  m.def("tree_walk", &tree_walk, "DDTree tree walk");
  m.def("step_stats", &step_stats, "DDTree step counters, shadow chain and budget-auto sums (in place)");
}
