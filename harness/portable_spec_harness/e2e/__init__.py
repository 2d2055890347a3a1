"""End-to-end runs of vLLM in child processes (one vLLM engine per process: its state is process-global)."""
