"""Our adapter's log lines in vLLM's log stream. vLLM configures only its own ``vllm`` logger (with propagation off),
so without this a server's log would show none of ``portable_spec``'s lines (drafter graphs captured, their seconds
and memory, why a drafter stays on vLLM's path)."""

from __future__ import annotations

import logging

OURS = "portable_spec"


def share_vllm_log_handlers() -> bool:
    """Give the ``portable_spec`` logger vLLM's handlers and level, once; a no-op when it already has handlers (a user
    configured it) or vLLM has none. Returns whether it changed anything."""
    ours, theirs = logging.getLogger(OURS), logging.getLogger("vllm")
    if ours.handlers or not theirs.handlers:
        return False
    for handler in theirs.handlers:
        ours.addHandler(handler)
    ours.setLevel(theirs.level)
    ours.propagate = False  # as vLLM's own logger: never twice through a root handler
    return True
