"""CPU, the Triton interpreter with its bounds check: next-gdn65.sh's launch variants at B x budget
(``4 64``) on the bench's trees and bf16 inputs, heads ``H,HV,K,V`` (``1,3,128,128`` and
``16,48,128,128`` ran, results/2026-12-07f/README.md). An out-of-bounds lane stops the run with
OutOfBounds; prints each variant's seconds and whether its output has a NaN.

    TRITON_INTERPRET=1 python benchmark/ddtree/results/2026-12-07f/interp_bounds.py 4 64 16,48,128,128 VARIANT...
"""
import os, sys, time
assert os.environ.get("TRITON_INTERPRET") == "1"
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[4] / "python")); sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[2]))
import torch
from sglang_ddtree.testing.triton_interpreter import patch_scalar_index
patch_scalar_index()
from sglang_ddtree.testing.triton_interpreter import patch_bounds_check; patch_bounds_check()
import bench_gdn_tree as B
from sglang_ddtree.kernels import gdn_tree as kern

bs, budget = int(sys.argv[1]), int(sys.argv[2])
H, HV, K, V = [int(x) for x in sys.argv[3].split(",")]
variants = sys.argv[4:]
lay = B._tree_layout(bs, budget)
N = lay.parent.shape[1]; T = bs * N
bf = torch.bfloat16
torch.manual_seed(0)
q = torch.randn(T, H, K, dtype=bf); k = torch.randn(T, H, K, dtype=bf); v = torch.randn(T, HV, V, dtype=bf)
a = torch.randn(T, HV, dtype=bf); b = torch.randn(T, HV, dtype=bf)
A_log = torch.randn(HV) * 0.5; dt_bias = torch.randn(HV) * 0.5
state = torch.randn(bs + 1, HV, V, K) * 0.1
sidx = torch.arange(bs, dtype=torch.int32)
anc = lay.ancestor_mask.to(torch.uint8)
for var in variants:
    impl, bt, bv, nw, depth, qkb, pw, _, flags = B.parse_variant(var, "bf16x3")
    opts = kern.VerifyOptions(impl=impl, precision="bf16x3", block_t=int(bt), block_v=int(bv), num_warps=nw,
                              qk_block=qkb, prep_warps=pw, **B._flag_options(flags))

    t = time.time()
    o, u, G = kern.tree_gdn_verify(q, k, v, a, b, A_log, dt_bias, anc, state, sidx, max_depth=depth, options=opts)
    print(var, "N", N, "s", round(time.time() - t, 1), "nan", bool(torch.isnan(o).any()), flush=True)
