"""Our adapter's lines reach vLLM's log stream (vLLM's logger does not propagate, so nothing else would)."""

from __future__ import annotations

import logging

from portable_spec.logs import OURS, share_vllm_log_handlers


def test_our_logger_writes_through_vllms_handlers_once(vllm_platform):
    import vllm.logger  # noqa: F401  (configures the "vllm" logger on import)

    ours, theirs = logging.getLogger(OURS), logging.getLogger("vllm")
    saved = (list(ours.handlers), ours.level, ours.propagate)
    ours.handlers.clear()
    try:
        assert theirs.handlers, "vLLM no longer configures a handler on its 'vllm' logger"
        assert share_vllm_log_handlers() is True
        assert ours.handlers == theirs.handlers and ours.level == theirs.level and ours.propagate is False
        assert share_vllm_log_handlers() is False  # once: a second call adds nothing
        assert len(ours.handlers) == len(theirs.handlers)
        assert logging.getLogger("portable_spec.vllm_adapter").getEffectiveLevel() <= logging.INFO
    finally:
        ours.handlers[:] = saved[0]
        ours.setLevel(saved[1])
        ours.propagate = saved[2]
