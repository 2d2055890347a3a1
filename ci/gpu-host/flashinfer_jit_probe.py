"""Times FlashInfer's top-k/top-p sampling at its first use on a GPU host and again, the op vLLM's V1 sampler calls
on CUDA (``vllm/v1/sample/ops/topk_topp_sampler.py``'s ``flashinfer_sample``): on a host without FlashInfer's JIT
cache the first call builds the module with nvcc. Prints one JSON line.
    python3 ci/gpu-host/flashinfer_jit_probe.py TAG        (run twice: a fresh host, then cached)"""

import json
import sys
import time

if __name__ == "__main__":
    started = time.time()
    import torch
    import flashinfer  # after torch, as it ran

    imported = time.time()
    logits = torch.randn(2, 128256, device="cuda")
    top_k = torch.tensor([50, 50], device="cuda", dtype=torch.int32)
    top_p = torch.tensor([0.9, 0.9], device="cuda")
    flashinfer.sampling.top_k_top_p_sampling_from_logits(logits, top_k, top_p, deterministic=True)
    torch.cuda.synchronize()
    first = time.time()
    probs = logits.softmax(dim=-1)
    flashinfer.sampling.top_p_sampling_from_probs(probs, top_p, deterministic=True)
    flashinfer.sampling.top_k_sampling_from_probs(probs, top_k, deterministic=True)
    torch.cuda.synchronize()
    print(json.dumps({"tag": sys.argv[1] if len(sys.argv) > 1 else "", "flashinfer": flashinfer.__version__,
                      "import_s": round(imported - started, 2), "top_k_top_p_first_call_s": round(first - imported, 2),
                      "top_p_and_top_k_s": round(time.time() - first, 2)}))
