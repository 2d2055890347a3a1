"""portable_spec: FULL-graph speculative-decoding drafters for vLLM on CUDA, ROCm and MUSA.

Nothing here imports vLLM; the only place that does is `portable_spec.vllm_adapter`.
"""

__version__ = "0.1.0"
