"""The platform this process serves on, decided once: what our ``vllm.platform_plugins`` probe answers, why it cannot
(one line), which MUSA stack is installed and whether a simulated device answers instead.

vLLM resolves its platform once per process, lazily (``vllm/platforms/__init__.py``: ``current_platform`` on first
use). This module mirrors that for our side: ``current()`` computes one ``Selection`` on first use and every reader
gets that object (the probe, which vLLM calls twice per process; the general plugin; the error class's import; the
CLI's stack section), with the ``vllm.platform_plugins`` / ``vllm.general_plugins`` entry points scanned once. The
cache is keyed by its inputs (``VLLM_PLATFORM``, ``PORTABLE_SPEC_SIM_DEVICE``, ``VLLM_PLUGINS`` and the import path
the entry points are found on), so a process, or a test, that changes them gets a fresh answer and never a stale one.

Computing it never raises and never imports vLLM or initialises a device: vLLM swallows a probe's exceptions and
would fall back to another platform silently, and ``vllm.platforms.cuda`` does not even import without a GPU.
"""

from __future__ import annotations

import functools
import importlib.metadata
import sys
from dataclasses import dataclass
from typing import Any

from portable_spec import envs
from portable_spec.errors import PlatformError
from portable_spec.vllm_adapter.platform import qualnames, vllm_musa_stack
from portable_spec.vllm_adapter.platform.vllm_musa_stack import VllmMusa

PLATFORM_PLUGINS_GROUP = "vllm.platform_plugins"
GENERAL_PLUGINS_GROUP = "vllm.general_plugins"


def sim_plugin_name(name: str) -> str:
    """The entry-point name of the simulation plugin for platform ``name`` (written by the harness, never by pip)."""
    return f"portable_spec_{name}_sim"


@dataclass(frozen=True)
class Selection:
    """One process's platform decision (see the module's docstring)."""

    name: str | None
    """``VLLM_PLATFORM`` lower-cased and stripped; None: unset (vLLM keeps its built-in platforms)."""
    qualname: str | None
    """What our probe answers: a vLLM platform class, ``qualnames.ERROR_CLASS`` when ``problem`` is set, or None
    (unset, or we step aside for a simulation's plugin or for vllm-musa alone)."""
    problem: str | None
    """Why ``name`` cannot be served here, in one line naming the fix; None: it can."""
    stack: VllmMusa | None
    """The vllm-musa this interpreter has; None: our standalone MUSA class is the MUSA stack."""
    simulated: bool
    """A simulated device stands in for ``name`` (the harness's musa-sim): its own plugin answers, not ours."""
    left_to_vllm_musa: bool
    """``VLLM_PLATFORM=musa`` with vllm-musa's platform probe loaded too: ours steps aside, vllm-musa serves alone."""
    plugins: tuple[str, ...] | None
    """``VLLM_PLUGINS`` as vLLM reads it (None: unset)."""

    @property
    def ours(self) -> bool:
        """Whether our layer serves this process (our class, a simulation of it, or the error our class's
        selection raises), i.e. whether the general plugin installs itself."""
        return (self.name in qualnames.PLATFORM_CLASSES and qualnames.ours(qualnames.PLATFORM_CLASSES[self.name])
                and not self.left_to_vllm_musa)


def current() -> Selection:
    """This process's ``Selection`` for the environment as it is now (computed once per distinct input)."""
    plugins = envs.vllm_plugins()
    return _selection(envs.requested_platform(), envs.simulated_device(),
                      None if plugins is None else tuple(plugins), tuple(sys.path))


def forget() -> None:
    """Drop the cached selection and entry-point scan (a test that changes what they read by other means)."""
    _selection.cache_clear()
    _entry_points.cache_clear()


@functools.lru_cache(maxsize=None)
def _entry_points(path: tuple[str, ...]) -> tuple[Any, ...]:
    """The platform and general plugin entry points on ``path`` (= ``sys.path``, the cache key): one scan."""
    found = importlib.metadata.entry_points()
    return (*found.select(group=PLATFORM_PLUGINS_GROUP), *found.select(group=GENERAL_PLUGINS_GROUP))


@functools.lru_cache(maxsize=None)
def _selection(name: str | None, sim: str | None, plugins: tuple[str, ...] | None,
               path: tuple[str, ...]) -> Selection:
    plugin_list = None if plugins is None else list(plugins)
    simulated = name is not None and sim == name
    try:
        found = _entry_points(path)
        stack = vllm_musa_stack.vllm_musa_in(found)
        problem = None if name is None else _problem(name, simulated, stack, plugin_list, found)
    except Exception as exc:  # never raise where vLLM's probe loop would swallow it: the error class says it
        stack, problem = None, f"portable_spec could not decide {envs.PLATFORM_ENV}={name}: {type(exc).__name__}: {exc}"
    left = (name == "musa" and not simulated and stack is not None
            and vllm_musa_stack.vllm_musa_answers_too(stack, plugin_list))
    if name is None or (problem is None and (simulated or left)):
        qualname = None
    elif problem is not None:
        qualname = qualnames.ERROR_CLASS
    else:
        qualname = vllm_musa_stack.musa_platform_class(stack) if name == "musa" else qualnames.PLATFORM_CLASSES[name]
    return Selection(name=name, qualname=qualname, problem=problem, stack=stack, simulated=simulated,
                     left_to_vllm_musa=left, plugins=plugins)


def _problem(name: str, simulated: bool, stack: VllmMusa | None, plugins: list[str] | None,
             found: tuple[Any, ...]) -> str | None:
    """Why ``name`` cannot be used on this host (one line), or None. Uses our ports only, never vLLM; imported here,
    so that the simulation's own probe, which shares this module's names, stays as light as vLLM's probes."""
    from portable_spec.ports import platform_class

    try:
        port = platform_class(name, source=envs.PLATFORM_ENV)
    except PlatformError as exc:
        return str(exc)
    if simulated:
        if any(ep.group == PLATFORM_PLUGINS_GROUP and ep.name == sim_plugin_name(name) for ep in found):
            return None
        return (f"{envs.SIM_DEVICE_ENV}={name} asks for the {name}-sim platform plugin ({sim_plugin_name(name)}), "
                "which this interpreter does not see: run through the harness (portable_spec_harness.musa_sim_plugin "
                f"puts it on PYTHONPATH), or unset {envs.SIM_DEVICE_ENV}")
    problem = port.unavailable_reason()
    if problem is None and name == "musa" and stack is not None:
        return vllm_musa_stack.missing_general_plugins(stack, plugins)
    return problem
