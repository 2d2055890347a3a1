"""Our vLLM worker: builds our V1 model runner (FULL drafter graphs) in place of vLLM's, for the V1 runner only.

vLLM 0.26.0's ``Worker.init_device`` imports ``GPUModelRunner`` from ``vllm.v1.worker.gpu_model_runner`` inside the
method, so swapping that module attribute for the duration of the one call reaches exactly that construction and
nothing else. Model Runner V2 (``vllm.v1.worker.gpu``) is untouched: it already has FULL draft graphs.
"""

from __future__ import annotations

import vllm.v1.worker.gpu_model_runner as v1_runner_module
from vllm.v1.worker.gpu_worker import Worker

from portable_spec.vllm_adapter.draft_graph_policy import draft_graph_mode
from portable_spec.vllm_adapter.logs import share_vllm_log_handlers
from portable_spec.vllm_adapter.overrides import overridden


class PortableWorker(Worker):
    def init_device(self) -> None:
        share_vllm_log_handlers()  # the worker process logs our capture lines: put them where vLLM's go
        if self.vllm_config.use_v2_model_runner or draft_graph_mode(self.vllm_config) != "full":
            super().init_device()
            return
        from portable_spec.vllm_adapter.v1_runner import PortableV1ModelRunner

        with overridden(v1_runner_module, "GPUModelRunner", PortableV1ModelRunner):
            super().init_device()
