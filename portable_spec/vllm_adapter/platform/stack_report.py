"""What ``portable-spec probe --platform musa`` says about the MUSA stack: which one this interpreter has, what our
probe answers, and what our layer binds on top. Read from the process's one platform ``Selection`` (the same answer
vLLM gets from our probe); names only: nothing is imported or bound here."""

from __future__ import annotations

from typing import Any

from portable_spec.capture_sizes import METHODS
from portable_spec.vllm_adapter.platform import qualnames, selection
from portable_spec.vllm_adapter.platform import vllm_musa_contract as contract
from portable_spec.vllm_adapter.platform.vllm_musa_stack import (
    INSTALL,
    drafter_left_to_vllm_musa,
    missing_general_plugins,
    musa_platform_class,
    plugins_value,
    substitutes_on_top,
    vllm_musa_answers_too,
)


def stack_report() -> dict[str, Any]:
    """The stack section: found, our probe's answer for ``VLLM_PLATFORM=musa``, the worker, what we bind."""
    from portable_spec.kernels import substitutions_for

    stack, plugins = selection.current().stack, selection.current().plugins
    plugin_list = None if plugins is None else list(plugins)
    names = [sub.name for sub in substitutions_for("musa")]
    layer = {"config hook": "capture-size planner, live-graph budget (torchada's cap, TORCHADA_GRAPH_EXEC_CAP)",
             "graph pool": "one per device, vLLM's and our drafter's graphs (SharedPoolMixin)"}
    if stack is None:
        return {"found": "standalone (vllm-musa not installed)", "vllm_platform": musa_platform_class(None),
                "worker": qualnames.MUSA_WORKER,
                "our_layer": {**layer, "drafter graphs": "ours (our V1 runner)",
                              "kernel substitutes": f"all {len(names)} MUSA substitutes",
                              "attention": "selected from our MUSA rows of the capability table"},
                "serving": f"needs vllm-musa on a real MUSA host: {INSTALL}"}
    bound, left = substitutes_on_top(names)
    problem = missing_general_plugins(stack, plugin_list)
    composes = not vllm_musa_answers_too(stack, plugin_list) and problem is None
    if composes:
        answer = musa_platform_class(stack)
    elif problem:
        answer = f"error: {problem}"
    else:
        answer = f"none: our probe steps aside, {stack.label} serves alone"
    drafters = {m: drafter_left_to_vllm_musa(m) or "ours (our V1 runner)" for m in METHODS}
    return {"found": stack.label, "vllm_platform": answer,
            "worker": qualnames.COMPOSED_MUSA_WORKER if composes else "vllm-musa's",
            "vllm_plugins": {"value": "unset" if plugins is None else ",".join(plugins),
                             "composes": composes, "needed": plugins_value(stack)},
            "our_layer": {**layer, "drafter graphs": drafters,
                          "kernel substitutes": {"bound on top": ", ".join(bound) or "none",
                                                 "left to vllm-musa": left},
                          "attention": "vllm-musa's selection (its backends; our table's MUSA rows name them)"}}


def substitutions_bound_here() -> tuple[Any, ...]:
    """The substitution table as our worker binds it on this interpreter's stack: without the entries vllm-musa
    patches itself where vllm-musa is installed."""
    from portable_spec.kernels import SUBSTITUTIONS

    if selection.current().stack is None:
        return SUBSTITUTIONS
    return tuple(sub for sub in SUBSTITUTIONS if sub.name not in contract.DEFERRED_SUBSTITUTES)
