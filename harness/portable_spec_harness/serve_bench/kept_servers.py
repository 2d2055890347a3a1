"""Servers one call of a serving benchmark leaves running for the next call of the same benchmark
(``--keep-servers PATH``), and their adoption by that call (``--reuse-servers PATH``).

Why: on the project's GPU host one call lasts at most 10 minutes, so one table's benchmark is split over several
calls, and each later call booted its servers again: 63–138 s for the 8B + 1B-shaped pair, a sixth to a quarter of a
call. ``vllm serve`` runs in a process session of its own (``vllm_serve.ServerProcess``), so it outlives the call
that started it on a host that stays up between calls. A kept server is adopted only where the next call would boot
the same server (``fingerprint``: the same ``vllm serve`` arguments but the port, the same environment switches, the
same code) and it is alive and answers ``/health``; otherwise it is stopped and a fresh one boots, and the report says
why (``reused`` / ``not_reused`` in the variant's boot record). The environment compared is the one the server
is launched with (``servers.server_env``): built over the environment the benchmark process was started with, not
what its own imports (vLLM's, torch's) wrote into ``os.environ`` later, so a fingerprint taken at one call's end
equals the one the next call takes at its boot. A server that ran the phase clock is never kept (its
profiler pass can leave it slower afterwards): ``--keep-servers`` needs ``--no-phase-clock``. Under ``--placement
in_turn`` the one server kept is the last round's last, where the next call's first round starts with its variant
(``driver.Bench.in_turn``). Rounds still pair
within a call; ``combine`` pools the calls as before; each call's report copies the whole server log, boot included,
so the JIT judge reads every compile since boot.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from portable_spec_harness import vllm_serve
from portable_spec_harness.serve_bench import servers
from portable_spec_harness.serve_bench.servers import BenchServer

KIND = "serve_bench_kept_servers"
ENV_PREFIXES = ("VLLM_", "PORTABLE_SPEC", "CUDA_", "NCCL_", "TORCH", "PYTORCH_", "TRITON_", "PYTHONPATH", "HF_",
                "TRANSFORMERS_", "NVSHMEM_", "FLASHINFER")
"""The environment a server's behaviour follows from; the rest (the lane's own knobs, ``OUT``) differs per call."""
CODE_ROOTS = ("portable_spec", "harness/portable_spec_harness")
"""The code a server runs from this tree: the product and the harness (its worker extension)."""
ROOT = Path(__file__).resolve().parents[3]


def code_hash(root: Path = ROOT) -> str:
    """A digest of every Python file of ``CODE_ROOTS``: a later call with other code boots its own servers."""
    digest = hashlib.sha256()
    for top in CODE_ROOTS:
        for path in sorted((root / top).rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def fingerprint(server: BenchServer, code: str) -> dict[str, Any]:
    """What must be equal for a kept server to stand in for the one this call would boot."""
    env = servers.server_env(server)
    return {"serve_args": servers.serve_args(server, 0), "code": code,
            "env": {k: env[k] for k in sorted(env) if k.startswith(ENV_PREFIXES)}}


def write(path: Path, entries: dict[str, dict[str, Any]]) -> None:
    """The registry of kept servers: variant -> fingerprint, port, pid, log, first boot, and the cells the server has
    served over the chain (``served_cells``: where the next call may skip a warm run, ``Bench.warm_skip``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"kind": KIND, "written": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                "servers": entries}, indent=1))


def read(path: Path) -> dict[str, dict[str, Any]]:
    """The kept servers of an earlier call; none where the file is missing (a fresh host: boot as usual) or is no
    registry."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data.get("servers", {}) if isinstance(data, dict) and data.get("kind") == KIND else {}


def mismatch(entry: dict[str, Any], wanted: dict[str, Any]) -> str | None:
    """Why a kept server cannot stand in for the wanted one (the first differing part), or None."""
    have = entry.get("fingerprint") or {}
    for part in ("code", "serve_args", "env"):
        if have.get(part) != wanted[part]:
            if part == "env":
                keys = sorted(k for k in {*have.get("env", {}), *wanted["env"]}
                              if have.get("env", {}).get(k) != wanted["env"].get(k))
                return f"its environment differs ({', '.join(keys[:4])})"
            return {"code": "the code changed since it booted",
                    "serve_args": "its vllm serve arguments differ"}[part]
    return None


class AdoptedProcess:
    """A kept ``vllm serve`` another call started: alive while its pid is, stopped through its process group (the
    engine core included), as ``vllm_serve.ServerProcess`` stops its own."""

    def __init__(self, pid: int, grace_s: float = vllm_serve.STOP_GRACE_S) -> None:
        self.pid, self.grace_s = pid, grace_s

    def alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        try:  # a zombie is no server
            return Path(f"/proc/{self.pid}/stat").read_text().split(") ")[-1][:1] != "Z"
        except OSError:
            return True

    @property
    def returncode(self) -> int | None:
        return None if self.alive() else 0

    def stop(self) -> int | None:
        if self.alive():
            try:
                os.killpg(self.pid, signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                pass
            deadline = time.monotonic() + self.grace_s
            while self.alive() and time.monotonic() < deadline:
                time.sleep(0.2)
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        return None


def adopt(entry: dict[str, Any]) -> AdoptedProcess | None:
    """The kept server's process where it is still running, else None."""
    pid = entry.get("pid")
    process = AdoptedProcess(int(pid)) if isinstance(pid, int) else None
    return process if process is not None and process.alive() else None


def pid_of(handle: Any) -> int | None:
    """A launched or adopted server's pid (``ServerProcess.proc.pid``, ``AdoptedProcess.pid``); None for a handle
    with neither (the CPU tests' in-process servers, which their tests adopt by port)."""
    proc = getattr(handle, "proc", None)
    return getattr(proc, "pid", None) or getattr(handle, "pid", None)
