"""Worker and model runner (as ``vllm/v1/worker``): ``PortableWorker`` (kernel substitutes, our V1 runner),
``MusaWorker`` (vLLM's device gate), the V1 runner subclass and its boot-time kernel warm-up."""
