"""vLLM's plugin entry points (as ``vllm/plugins``): the platform probe ``VLLM_PLATFORM`` reaches, the error it raises
when it cannot honour the value, and the general plugin every vLLM process runs. Cheap on purpose: nothing here
imports vLLM's platform modules."""
