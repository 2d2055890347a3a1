"""Under Model Runner V2 our CUDA platform changes nothing a step runs (issue 23's no-regression, by construction).

The MRV2 bench cannot resolve its 0.98 bound at the noise of a shared host (``harness/e2e/paired.py``), so what makes
MRV2 on our platform the same engine as MRV2 on vLLM's is pinned here, against the installed vLLM's source: the
kernels our CUDA platform substitutes are V1-proposer kernels that no module of MRV2's package names (so none of
them launches under MRV2), and our worker changes only the boot. The bench's JSON shows the rest per run (capture
sizes, graph managers, pools, attention backends: equal). A vLLM whose MRV2 starts calling one of those kernels
fails here, and the bench then has to decide the bound.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

pytest.importorskip("vllm")

from portable_spec.kernels.registry import substitutions_for  # noqa: E402

MRV2_PACKAGE = "vllm.v1.worker.gpu"


def mrv2_sources() -> dict[str, str]:
    spec = importlib.util.find_spec(MRV2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"this vLLM has no {MRV2_PACKAGE} (Model Runner V2)")
    root = Path(next(iter(spec.submodule_search_locations)))
    return {str(path.relative_to(root)): path.read_text() for path in sorted(root.rglob("*.py"))}


def kernels_mrv2_names(sources: dict[str, str], names: set[str]) -> dict[str, list[str]]:
    """For each kernel name, the MRV2 modules whose source names it."""
    return {name: [path for path, text in sources.items() if name in text] for name in sorted(names)}


def cuda_kernel_names() -> set[str]:
    return {target.rsplit(".", 1)[1] for sub in substitutions_for("cuda") for target in sub.targets}


def test_no_kernel_our_cuda_platform_substitutes_is_named_by_model_runner_v2():
    sources = mrv2_sources()
    names = cuda_kernel_names()
    assert len(sources) >= 10 and names, (len(sources), names)  # something was compared
    assert all(not sub.targets[0].startswith(MRV2_PACKAGE) for sub in substitutions_for("cuda"))
    found = kernels_mrv2_names(sources, names)
    assert not any(found.values()), f"MRV2 names a kernel our CUDA platform substitutes: {found}"


def test_the_check_sees_a_kernel_that_model_runner_v2_does_name():
    """The same check finds MRV2's own Triton kernels (every ``name[grid](`` launch in its source): it can fail."""
    sources = mrv2_sources()
    own = {m.group(1) for text in sources.values() for m in re.finditer(r"\b(\w+_kernel)\[", text)}
    assert len(own) >= 5, own
    found = kernels_mrv2_names(sources, own | cuda_kernel_names())
    assert all(found[name] for name in own) and not any(found[name] for name in cuda_kernel_names())


def test_our_worker_changes_only_the_boot():
    from vllm.v1.worker.gpu_worker import Worker

    from portable_spec.vllm_adapter.worker.gpu_worker import PortableWorker

    redefined = {name for name in vars(PortableWorker) if callable(getattr(PortableWorker, name))
                 and not name.startswith("__")}
    # init_device builds our V1 runner; compile_or_warm_up_model adds the MRV2 sampled warm-up (boot only).
    assert redefined == {"init_device", "compile_or_warm_up_model"}
    assert all(hasattr(Worker, name) for name in redefined)
