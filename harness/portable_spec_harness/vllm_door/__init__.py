"""Fenced off from the serve path: the harness's only door to vLLM (an offline engine and the profiler scopes the bench
adds while profiling). ``vllm serve`` never imports it (``tests/test_layout.py``)."""
