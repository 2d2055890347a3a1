"""Fenced off from the serve path: tools the CLI and the lanes run against vLLM (attention verification and its
agreement check, the kernel report, the Triton 3.2 check's worker, the CPU test platform). ``vllm serve`` never
imports them (``tests/test_layout.py``)."""
