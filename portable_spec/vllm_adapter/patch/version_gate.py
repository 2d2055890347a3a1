"""Which vLLM this process has, and what of ours exists on it: the one place per-version differences live.

The span: vLLM 0.26.0 (the GPU host's), 0.28.0 (vllm-musa's pin) and 0.33.0 (the newest); the cpu lane runs each
(``ci/requirements-cpu*.txt``). Code that differs by version asks here instead of comparing versions itself:

- ``has(feature)`` / ``why_not(feature)``: whether one of our features exists on the installed vLLM, and the one
  line that says why not; ``say_unsupported(feature, logger)`` logs that line once per process;
- ``pick({"0.26.0": a, "0.28.0": b})``: the value for the installed vLLM, from the newest key at or below it (how the
  census and the hook-point tests state what moved, and since when).

Versions are read from the installed distribution's metadata (``portable_spec.versions``, re-exported here): nothing here imports vLLM. ``python -m
portable_spec.vllm_adapter.patch.version_gate`` prints the installed version and every feature's verdict as JSON
(the cpu lane keeps it beside each version's test results for ``versions.json``).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from portable_spec.versions import Version, installed, installed_text, parse, pick  # noqa: F401  (re-exported)

SPAN = ("0.26.0", "0.28.0", "0.33.0")
"""The versions the cpu lane checks; ``pyproject.toml``'s ``vllm`` extra states the range they bound."""
SUPPORTED = ">=0.26.0,<0.34"
"""The supported range (``tests/test_version_gate.py`` holds ``pyproject.toml`` to it)."""


@dataclass(frozen=True)
class Feature:
    """One of our features that exists only on some vLLM versions: ``[since, until)``."""

    name: str
    what: str
    why_not: str
    """Why it cannot exist outside the range: the one line logged and written into ``versions.json``."""
    since: str = SPAN[0]
    until: str | None = None

    def covers(self, version: Version) -> bool:
        return parse(self.since) <= version and (self.until is None or version < parse(self.until))


FEATURES: dict[str, Feature] = {f.name: f for f in (
    Feature(
        "v1_full_drafter",
        "our V1 runner (PortableV1ModelRunner): FULL drafter graphs, the draft prep folded into the first pass, the "
        "boot-time kernel warm-up",
        "from vLLM 0.29 Model Runner V2 runs every model our drafter covers (its speculator has FULL draft graphs of "
        "its own); the V1 runner is left to suffix/custom-class drafting, EAGLE parallel drafting, other-vocabulary "
        "drafts and DBO, and our V1 hook points (draft-prep kernels, warm-up state) are derived for 0.26-0.28 only: "
        "vLLM's own drafter runs",
        until="0.29.0"),
    Feature(
        "kernel_substitutes_cuda",
        "CUDA's batch-unspecialized launches of the V1 drafter's Triton kernels",
        "they substitute the V1 drafter's kernels, which from vLLM 0.29 our drafter no longer runs (0.33 moved their "
        "binding sites): vLLM's kernels run",
        until="0.29.0"),
    Feature(
        "mrv2_graph_budget",
        "the live-graph budget's count of Model Runner V2's target and speculator graphs (capture_sizes/mrv2.py, "
        "held to the graph managers of vLLM 0.26.0, 0.28.0 and 0.33.0 by tests/test_mrv2_sizes.py): under a "
        "live-graph limit, MRV2's largest capture sizes are dropped until its graphs fit",
        "the count is checked against Model Runner V2's graph managers of vLLM 0.26.0 through 0.33.0 only; a newer "
        "vLLM may capture graphs it does not model: no capture size is dropped for MRV2's graphs (its sizes stay "
        "vLLM's)",
        until="0.34.0"),
    Feature(
        "mrv2_standalone_graphs",
        "FULL graphs for Model Runner V2's standalone draft model (method draft_model): its decode steps 1..K-1 "
        "replay graphs captured by MRV2's own SpeculatorCudaGraphManager (spec_decode/standalone_ar.py, installed by "
        "worker/mrv2_speculator.py)",
        "MRV2 runs the standalone draft model through StandaloneARSpeculator from vLLM 0.33.0 only, and our subclass "
        "and its hook points (init_speculator's lazy import, the eager decode loop it mirrors) are checked against "
        "0.33.0 alone: vLLM's speculator runs, eager",
        since="0.33.0", until="0.34.0"),
    Feature(
        "mrv2_sampled_warmup",
        "the boot-time sampled warm-up under Model Runner V2 (worker/mrv2_warmup.py, planned by "
        "mrv2_sampling_plan.py from vLLM 0.26.0's, mrv2_sampling_plan_028.py from 0.28.0's and "
        "mrv2_sampling_plan_033.py from 0.33.0's MRV2 sampler and rejection sampler kernels; a version between them "
        "gets the newest model at or below it): after MRV2's own warm-up, sampled rounds compile every sampling-path "
        "kernel variant serving reaches",
        "its kernel models and hook point (gpu_worker.warmup_kernels) are derived from vLLM 0.26.0's, 0.28.0's and "
        "0.33.0's Model Runner V2 only; on this vLLM, MRV2's own warm-up runs alone and its first sampled request may "
        "compile sampling kernels",
        until="0.34.0"),
    Feature(
        "planner_mirrors_vllm_sizes",
        "the capture-size planner's mirror of vLLM's own size rules (capture_sizes/vllm_rules.py: default ladder, "
        "default max, sequence-parallel filter): with no sizes given, its target list is the one vLLM would pick",
        "vLLM 0.33 changed its default capture sizes (request counts times 1+K appended, 1024 on Blackwell) and "
        "dropped the sequence-parallelism pass; the planner starts from vLLM 0.26's ladder, so its list is valid "
        "(multiples of 1+K within vLLM's max) but not the one vLLM 0.33 would pick",
        until="0.33.0"),
)}


def _feature(name: str) -> Feature:
    try:
        return FEATURES[name]
    except KeyError:
        raise KeyError(f"unknown version-gate feature {name!r}; known: {', '.join(FEATURES)}") from None


def has(name: str, version: Version | None = None) -> bool:
    """Whether feature ``name`` exists on ``version`` (default: the installed vLLM; without vLLM: False)."""
    version = installed() if version is None else version
    return version is not None and _feature(name).covers(version)


def why_not(name: str, version: Version | None = None) -> str | None:
    """The one line saying why ``name`` does not exist on ``version`` (None where it does)."""
    version = installed() if version is None else version
    if version is not None and has(name, version):
        return None
    shown = "no vLLM installed" if version is None else "vLLM " + ".".join(map(str, version))
    return f"{name} unsupported on {shown}: {_feature(name).why_not}"


_SAID: set[str] = set()


def say_unsupported(name: str, logger: logging.Logger) -> bool:
    """Log ``why_not(name)`` once per process where the feature is absent; returns whether it is absent."""
    reason = why_not(name)
    if reason is None:
        return False
    if name not in _SAID:
        _SAID.add(name)
        logger.info("portable_spec: %s", reason)
    return True


def report(version: Version | None = None) -> dict:
    """The installed version and each feature's verdict (what ``versions.json`` records per version)."""
    version = installed() if version is None else version
    return {"vllm": installed_text() if version is None or version == installed() else ".".join(map(str, version)),
            "torch": installed_text("torch"),
            "in_span": version is not None and ".".join(map(str, version)) in SPAN,
            "features": {name: {"supported": has(name, version), "what": feature.what,
                                **({} if has(name, version) else {"why_not": why_not(name, version)})}
                         for name, feature in FEATURES.items()}}


if __name__ == "__main__":
    print(json.dumps(report(), indent=2))
