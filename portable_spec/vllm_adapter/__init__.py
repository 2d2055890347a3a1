"""The vLLM adapter: the only package in portable_spec that imports vllm.

Entry points (pyproject.toml): ``vllm.platform_plugins`` → ``platform_plugin:platform_qualname`` (``VLLM_PLATFORM`` selects our
platform class) and ``vllm.general_plugins`` → ``general_plugin:register``. Modules here import vLLM lazily where a
probe must stay cheap (``platform_plugin`` never imports vLLM's platform modules).
"""
