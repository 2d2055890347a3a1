"""What a soak server's log says about our drafter and the engine: our capture line, draft keys that run eagerly, a
drafter left to vLLM's path, the warm-up line, vLLM's ERROR lines and tracebacks, its JIT monitor's compiles after
boot and whether the monitor armed (read by ``portable_spec_harness.jit_judge``, the one judge of "no compile after boot"), and
its one line on async scheduling. The lines are the adapter's own (``draft/capture_log.py``, ``draft/runner.py``,
``spec_decode/policy.py``, ``worker/kernel_warmup.py``) and vLLM 0.26.0's."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from portable_spec.draft.capture_log import CAPTURE_LOG_PREFIX
from portable_spec_harness.e2e.parent import clipped
from portable_spec_harness import jit_judge

EAGER_KEY = re.compile(r"portable_spec: draft key .* runs eagerly")
LEFT_TO_UPSTREAM = "portable_spec: drafter left to upstream vLLM"
WARMUP = "portable_spec: kernel warm-up"
ERROR = re.compile(r"^(\(\w+ pid=\d+\) )?ERROR \d\d-\d\d |^Traceback \(most recent call last\)")
SHUTDOWN = "[shutdown]"
"""vLLM 0.26.0's shutdown lines: the soak stops servers with SIGTERM (``mode=abort timeout=0s``), after which the API
server's output handler logs the engine's exit as ``EngineDeadError``; errors from then on are the stop's, not the
load's."""
ASYNC = re.compile(r"Asynchronous scheduling is (enabled|disabled)")
WARMUP_MISMATCHES = re.compile(r"(\d+) pointer mismatches")
EXAMPLES = 5


def scan_text(text: str) -> dict[str, Any]:
    every_line = text.splitlines()
    stop = next((i for i, line in enumerate(every_line) if SHUTDOWN in line), len(every_line))
    lines, after_stop = every_line[:stop], every_line[stop:]

    def having(test: Any) -> list[str]:
        return [line for line in lines if test(line)]

    errors = having(lambda line: ERROR.search(line))
    warmups = having(lambda line: WARMUP in line)
    async_lines = [m.group(1) for line in lines if (m := ASYNC.search(line))]
    return {
        "capture_lines": [clipped(x) for x in having(lambda line: CAPTURE_LOG_PREFIX in line)],
        "eager_keys": len(having(lambda line: EAGER_KEY.search(line))),
        "left_to_upstream": [clipped(x) for x in having(lambda line: LEFT_TO_UPSTREAM in line)][:EXAMPLES],
        "warmup_lines": [clipped(x) for x in warmups][:EXAMPLES],
        "warmup_pointer_mismatches": sum(int(m.group(1)) for x in warmups if (m := WARMUP_MISMATCHES.search(x))),
        "error_lines": len(errors),
        "error_lines_after_shutdown": sum(bool(ERROR.search(line)) for line in after_stop),
        "error_examples": [clipped(x) for x in errors[:EXAMPLES]],
        "async_scheduling": async_lines[-1] == "enabled" if async_lines else None,
        **jit_judge.scan(text).as_json(),  # the whole log, as the serving checks read theirs
    }


def scan(log: Path) -> dict[str, Any]:
    try:
        return scan_text(log.read_text(errors="replace"))
    except OSError as exc:
        return {"unreadable": f"{type(exc).__name__}: {exc}"}
