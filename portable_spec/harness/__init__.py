"""Harnesses: generated models, synthetic draft steps, parity checks, benchmarks and the vLLM end-to-end drivers.

Nothing that ``vllm serve`` loads imports this package (``tests/test_layout.py`` checks it): the product is
``platforms``, ``capture_sizes``, ``attention_caps``, ``kernels``, ``draft`` (the one draft-graph runner),
``vllm_adapter`` and the CLI. Harness code that drives vLLM reaches it through ``vllm_adapter.harness_door.offline`` only.
"""
