"""The ``vllm.platform_plugins`` probe: ``VLLM_PLATFORM`` names the platform, unset leaves vLLM's built-ins alone.

vLLM calls every probe twice and swallows their exceptions, so this probe never raises and never imports vLLM's
platform modules (``vllm.platforms.cuda`` does not even import without a GPU). It answers what the process's one
platform ``Selection`` says (``platform/selection.py``): our class, or for a value we cannot honour the error class
(vLLM imports that outside its try, and the import raises our one-line error where the user sees it), or None.

A simulated device (``PORTABLE_SPEC_SIM_DEVICE=musa`` with ``VLLM_PLATFORM=musa``: the harness's musa-sim engine) is
answered by the simulation's own platform plugin, which only the harness puts on a process's path; this probe then
steps aside, because vLLM refuses to choose between two out-of-tree plugins. The product never imports the harness.

``VLLM_PLATFORM=musa`` with vllm-musa installed answers our class composed on vllm-musa's, when ``VLLM_PLUGINS``
keeps vllm-musa's platform plugin out (its probe answers on every MUSA host); otherwise this probe steps aside and
vllm-musa serves alone (``platform/vllm_musa_stack.py`` says why, with the vLLM source lines).
"""

from __future__ import annotations

from portable_spec.vllm_adapter.platform import qualnames, selection, vllm_musa_stack


def platform_qualname() -> str | None:
    """Our platform's qualname for ``VLLM_PLATFORM=cuda|rocm|musa|cpu``, None when unset (or when a simulation's own
    plugin, or vllm-musa's alone, answers for it); says once per process when vllm-musa serves alone or our
    standalone MUSA class serves."""
    try:
        chosen = selection.current()
        if chosen.left_to_vllm_musa and chosen.problem is None:
            vllm_musa_stack.say_steps_aside(chosen.stack, chosen.plugins)
        elif chosen.qualname == qualnames.PLATFORM_CLASSES["musa"]:
            vllm_musa_stack.say_standalone()
        return chosen.qualname
    except Exception:  # never raise inside vLLM's probe loop; the error class's import says what went wrong
        return qualnames.ERROR_CLASS
