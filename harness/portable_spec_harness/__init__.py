"""portable_spec's harness (the distribution ``portable-spec-harness``, never in the product's wheel): generated
models, synthetic draft steps, parity checks, benchmarks, the vLLM end-to-end drivers, the serving soak and benchmark,
musa-sim, and the test fixtures that need vLLM.

It stands on the product and nothing in the product imports it (``tests/test_layout.py``). Inside the harness only
``vllm_door`` imports vLLM; the rest drives vLLM through it.
"""
