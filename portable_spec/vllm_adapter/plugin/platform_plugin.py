"""The ``vllm.platform_plugins`` probe: ``VLLM_PLATFORM`` names the platform, unset leaves vLLM's built-ins alone.

vLLM calls every probe twice and swallows their exceptions, so this probe never raises and never imports vLLM's
platform modules (``vllm.platforms.cuda`` does not even import without a GPU). A value we cannot honour returns the
qualname of ``platform_error.PlatformSelectionError``: vLLM imports that outside its try, and the import raises our
one-line error where the user sees it.

A simulated device (``PORTABLE_SPEC_SIM_DEVICE=musa`` with ``VLLM_PLATFORM=musa``: the harness's musa-sim engine) is
answered by the simulation's own platform plugin, which only the harness puts on a process's path; this probe then
steps aside, because vLLM refuses to choose between two out-of-tree plugins. The product never imports the harness.

``VLLM_PLATFORM=musa`` with vllm-musa installed answers our class composed on vllm-musa's, when ``VLLM_PLUGINS``
keeps vllm-musa's platform plugin out (its probe answers on every MUSA host); otherwise this probe steps aside and
vllm-musa serves alone (``platform/vllm_musa_stack.py`` says why, with the vLLM source lines).
"""

from __future__ import annotations

from portable_spec.envs import PLATFORM_ENV, SIM_DEVICE_ENV, requested_platform, simulated_device, vllm_plugins
from portable_spec.vllm_adapter.platform import vllm_musa_stack

ERROR_QUALNAME = "portable_spec.vllm_adapter.plugin.platform_error.PlatformSelectionError"
PLATFORM_PLUGINS_GROUP = "vllm.platform_plugins"


def sim_plugin_name(name: str) -> str:
    """The entry-point name of the simulation plugin for platform ``name`` (written by the harness, never by pip)."""
    return f"portable_spec_{name}_sim"


def sim_plugin_installed(name: str) -> bool:
    """Whether this interpreter sees the simulation's ``vllm.platform_plugins`` entry point for ``name``."""
    from importlib.metadata import entry_points

    return any(ep.name == sim_plugin_name(name) for ep in entry_points(group=PLATFORM_PLUGINS_GROUP))


def vllm_platform_qualname(name: str) -> str | None:
    """The vLLM platform class our port ``name`` names (``DevicePort.vllm_platform``), None for unknown names;
    for ``musa``, the class composed on vllm-musa's where vllm-musa is installed."""
    from portable_spec.errors import PlatformError
    from portable_spec.ports import platform_class

    try:
        qualname = platform_class(name, source=PLATFORM_ENV).vllm_platform
    except PlatformError:
        return None
    return vllm_musa_stack.platform_qualname(vllm_musa_stack.find_vllm_musa()) if name == "musa" else qualname


def leaves_musa_to_vllm_musa(name: str) -> bool:
    """Whether ``VLLM_PLATFORM=name`` is left to vllm-musa's own probe (``musa``, vllm-musa installed, and vLLM loads
    its platform plugin too): ours then answers None."""
    return name == "musa" and simulated_device() != name and vllm_musa_stack.steps_aside(
        vllm_musa_stack.find_vllm_musa())


def selection_problem(name: str) -> str | None:
    """Why ``name`` cannot be used on this host (one line), or None. Uses our ports only, never vLLM."""
    from portable_spec.errors import PlatformError
    from portable_spec.ports import platform_class

    try:
        cls = platform_class(name, source=PLATFORM_ENV)
    except PlatformError as exc:
        return str(exc)
    if simulated_device() == name:
        return None if sim_plugin_installed(name) else (
            f"{SIM_DEVICE_ENV}={name} asks for the {name}-sim platform plugin ({sim_plugin_name(name)}), which this "
            f"interpreter does not see: run through the harness (portable_spec_harness.musa_sim_plugin puts it on "
            f"PYTHONPATH), or unset {SIM_DEVICE_ENV}")
    problem = cls.unavailable_reason()
    stack = vllm_musa_stack.find_vllm_musa() if problem is None and name == "musa" else None
    return vllm_musa_stack.missing_general_plugins(stack, vllm_plugins()) if stack else problem


def platform_qualname() -> str | None:
    """Return our platform's qualname for ``VLLM_PLATFORM=cuda|rocm|musa|cpu``, None when unset (or when a simulation's
    own plugin, or vllm-musa's alone, answers for it)."""
    name = requested_platform()
    if name is None:
        return None
    try:
        if selection_problem(name):
            return ERROR_QUALNAME
        if simulated_device() == name or leaves_musa_to_vllm_musa(name):
            return None
        qualname = vllm_platform_qualname(name)
        if qualname == vllm_musa_stack.STANDALONE_PLATFORM:
            vllm_musa_stack.say_standalone()
        return qualname or ERROR_QUALNAME
    except Exception:  # never raise inside vLLM's probe loop; the error class re-derives the message
        return ERROR_QUALNAME
