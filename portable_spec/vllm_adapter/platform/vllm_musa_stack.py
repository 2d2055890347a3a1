"""Which MUSA stack this interpreter has (vllm-musa, or our standalone class), and how ``VLLM_PLATFORM=musa`` puts our
layer on vllm-musa with vLLM's own plugin mechanism. No vLLM import and no entry-point scan of its own: the platform
``selection`` scans once and asks this module what the entry points it found mean.

How the two probes coexist (vLLM 0.26.0, ``vllm/platforms/__init__.py`` and ``vllm/plugins/__init__.py``):

- ``resolve_current_platform_cls_qualname`` (``platforms/__init__.py`` l.211-251) calls every ``vllm.platform_plugins``
  probe and raises "Only one platform plugin can be activated" when two out-of-tree probes return a name (l.230). A
  probe can only return a name; it cannot silence another. vllm-musa's probe answers whenever ``import torch_musa``
  works (``vllm_musa_contract.PROBE_ANSWER``), i.e. on every MUSA host.
- ``load_plugins_by_group`` (``plugins/__init__.py`` l.36-74) loads only the entry points named in ``VLLM_PLUGINS``
  (l.64, ``plugin.name in allowed_plugins``), in every group, general plugins included. That is the one lever that
  takes vllm-musa's platform plugin (``musa``) out while keeping its general plugin (``musa_custom_ops``), which must
  still run: it registers vllm-musa's ops, communicators and attention backends.
- So OUR probe wins: with ``VLLM_PLUGINS=portable_spec,musa_custom_ops`` it answers ``PortableVllmMusaPlatform``
  (``platform/vllm_musa_platform.py``), which subclasses vllm-musa's ``MUSAPlatform`` by name and adds only our
  hooks. The reverse (vllm-musa's probe wins, our layer comes in through our general plugin) would need vllm-musa's class
  changed for the life of the process: no scoped, reversible hook reaches a class vLLM resolves once per process.
- ``VLLM_PLUGINS`` unset, or naming ``musa``: both probes would answer. Ours steps aside (returns None), so vLLM boots
  vllm-musa alone, and one warning names the value that composes: our layer never stops an engine vLLM would boot.
- ``VLLM_PLUGINS`` that keeps ours but drops ``musa_custom_ops``: vllm-musa's platform without its ops cannot serve;
  our probe answers with the error class, whose import raises one line naming the value (bad input).
- vllm-musa not installed: our standalone ``PortableMusaPlatform`` (CPU checks, musa-sim), with one warning that
  serving on real MUSA needs vllm-musa.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from portable_spec import envs
from portable_spec.vllm_adapter.platform import qualnames
from portable_spec.vllm_adapter.platform import vllm_musa_contract as contract

logger = logging.getLogger("portable_spec.vllm_adapter")

INSTALL = "install vllm-musa (its vLLM build, torch_musa, torchada), then pip install --no-deps portable-spec"
_SAID: set[str] = set()
"""Warnings already logged in this process (vLLM calls the probe twice in every process)."""


@dataclass(frozen=True)
class VllmMusa:
    """The vllm-musa this interpreter sees, through its entry points (never imported here)."""

    distribution: str
    version: str
    platform_plugin: str
    general_plugins: tuple[str, ...]

    @property
    def label(self) -> str:
        return f"{self.distribution} {self.version}"


def vllm_musa_in(found: Iterable[Any]) -> VllmMusa | None:
    """vllm-musa's distribution among scanned entry points, found by its platform entry point's target
    (``vllm_musa:musa_platform_plugin``); None: not installed."""
    found = tuple(found)
    platform_eps = [ep for ep in found
                    if ep.group == contract.PLATFORM_PLUGIN.group and ep.value == contract.PLATFORM_PLUGIN.value]
    if not platform_eps:
        return None
    ep = platform_eps[0]
    dist = getattr(ep, "dist", None)
    general = tuple(g.name for g in found
                    if g.group == contract.GENERAL_PLUGIN.group and g.value == contract.GENERAL_PLUGIN.value) \
        or (contract.GENERAL_PLUGIN.name,)
    return VllmMusa(distribution=dist.metadata["Name"] if dist else contract.DISTRIBUTION,
                    version=dist.version if dist else "unknown", platform_plugin=ep.name, general_plugins=general)


def plugins_value(stack: VllmMusa) -> str:
    """The ``VLLM_PLUGINS`` value that composes our layer with this vllm-musa."""
    return ",".join((contract.OUR_PLUGIN, *stack.general_plugins))


def vllm_musa_answers_too(stack: VllmMusa, plugins: list[str] | None) -> bool:
    """Whether vLLM would load vllm-musa's platform probe too (then ours must step aside)."""
    return plugins is None or stack.platform_plugin in plugins


def missing_general_plugins(stack: VllmMusa, plugins: list[str] | None) -> str | None:
    """One line when ``VLLM_PLUGINS`` keeps us but filters out vllm-musa's general plugin, else None."""
    if plugins is None or vllm_musa_answers_too(stack, plugins):
        return None
    missing = [name for name in stack.general_plugins if name not in plugins]
    if not missing:
        return None
    return (f"{envs.VLLM_PLUGINS_ENV}={','.join(plugins)} filters out {stack.label}'s general plugin "
            f"{', '.join(missing)}, which registers its ops, communicators and attention backends: set "
            f"{envs.VLLM_PLUGINS_ENV}={plugins_value(stack)}")


def musa_platform_class(stack: VllmMusa | None) -> str:
    """The class our probe answers ``VLLM_PLATFORM=musa`` with (once it answers at all)."""
    return qualnames.PLATFORM_CLASSES["musa"] if stack is None else qualnames.COMPOSED_MUSA_PLATFORM


def say_steps_aside(stack: VllmMusa, plugins: Sequence[str] | None) -> None:
    """The one warning (per process) that our probe leaves ``VLLM_PLATFORM=musa`` to vllm-musa alone, naming the
    value that composes."""
    _warn_once("step-aside", "portable_spec: %s=musa: %s is installed and vLLM loads its platform plugin %r too "
               "(%s %s); vLLM activates one platform plugin, so %s serves alone, without portable_spec's layer. To "
               "put our layer on it: %s=%s", envs.PLATFORM_ENV, stack.label, stack.platform_plugin,
               envs.VLLM_PLUGINS_ENV, "unset" if plugins is None else "names it", stack.label,
               envs.VLLM_PLUGINS_ENV, plugins_value(stack))


def say_standalone() -> None:
    """The one warning (per process) that comes with the standalone class."""
    _warn_once("standalone", "portable_spec: %s=musa without vllm-musa: our standalone MUSA class (CPU checks, "
               "musa-sim); serving on real MUSA needs vllm-musa: %s", envs.PLATFORM_ENV, INSTALL)


def _warn_once(key: str, message: str, *args: Any) -> None:
    if key not in _SAID:
        _SAID.add(key)
        logger.warning(message, *args)


def drafter_left_to_vllm_musa(method: str) -> str | None:
    """Why vllm-musa captures this drafter in FULL graphs itself (then ours steps aside), or None: ours runs."""
    if method == "dflash":
        if envs.vllm_musa_dflash_full_wrap():
            return (f"vllm-musa captures the DFlash drafter in FULL graphs itself ({envs.VLLM_MUSA_DFLASH_WRAP_ENV} "
                    "unset or not 0; set it to 0 for ours)")
        return None
    if envs.vllm_musa_draft_full_wrap():
        return (f"vllm-musa wraps the draft model in FULL graphs itself ({envs.VLLM_MUSA_DRAFT_WRAP_ENV}=1; unset "
                "it for ours)")
    if method in contract.EAGLE_RUNNER_METHODS and envs.vllm_musa_eagle_runner():
        return (f"vllm-musa replays the EAGLE draft chain as one graph itself ({envs.VLLM_MUSA_EAGLE_RUNNER_ENV}=1; "
                "unset it for ours)")
    return None


def substitutes_on_top(names: list[str]) -> tuple[list[str], dict[str, str]]:
    """Our MUSA substitutes ``names`` split into those bound on vllm-musa and those left to its own patches."""
    left = {name: contract.DEFERRED_SUBSTITUTES[name] for name in names if name in contract.DEFERRED_SUBSTITUTES}
    return [name for name in names if name not in left], left
