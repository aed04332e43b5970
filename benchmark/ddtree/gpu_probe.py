"""Start one sglang Engine on the GPU with the tiny models and print greedy outputs.

Usage: python benchmark/ddtree/gpu_probe.py <model> [<algorithm> [<budget>]]
A quick probe for the offline GPU host; the full equality checks live in
test/e2e/test_gpu_smoke.py.
"""

import json
import sys
import time

if __name__ == "__main__":
    import sglang as sgl

    from sglang_ddtree.testing import tiny_models

    model = sys.argv[1]
    algo = sys.argv[2] if len(sys.argv) > 2 else None
    kw = dict(model_path=str(tiny_models.model_path(model)), device="cuda", dtype="bfloat16",
              attention_backend="triton", sampling_backend="pytorch", mem_fraction_static=0.25,
              max_total_tokens=8192, max_running_requests=8, cuda_graph_max_bs_decode=4,
              log_level="info")
    if "nooverlap" in sys.argv:
        kw.update(disable_overlap_schedule=True)
    if algo == "DDTREE":
        kw.update(speculative_algorithm="DDTREE", speculative_ddtree_budget=int(sys.argv[3]),
                  speculative_draft_model_path=str(tiny_models.model_path(f"dflash-{model}")))
    elif algo == "DFLASH":
        kw.update(speculative_algorithm="DFLASH",
                  speculative_draft_model_path=str(tiny_models.model_path(f"dflash-{model}")))
    t = time.time()
    engine = sgl.Engine(**kw)
    print("startup_s", round(time.time() - t, 1), flush=True)
    outs = engine.generate(input_ids=[[5, 6, 7, 8, 9], [100, 200, 300]],
                           sampling_params={"temperature": 0, "max_new_tokens": 33})
    print(json.dumps({"algo": algo, "ids": [o["output_ids"] for o in outs]}), flush=True)
    engine.shutdown()
