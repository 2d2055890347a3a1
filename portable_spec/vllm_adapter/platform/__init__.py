"""Our vLLM platform classes (as ``vllm/platforms``): vLLM's CUDA/ROCm classes and a MUSA class with our hooks, the
config hook that applies the capture-size planner, and the one drafter plan read back at capture time."""
