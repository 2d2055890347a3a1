"""``vllm serve`` processes for the harness (the serving soak and the serving benchmark): a free port, the command as
this interpreter runs it, an e2e variant's environment for a server (and the environment this process was started
with, before its own imports wrote into it: ``without_drift``), the process in a group of its own, its health, and
stopping it.

Why one module: both drivers boot real servers on one GPU side by side and must stop every process they started,
engine cores included, whatever happens; the rules for that (ports below the ephemeral range, SIGTERM then SIGKILL
to the group, dev mode for ``/collective_rpc``) are the same for both.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

DEV_MODE_ENV = {"VLLM_SERVER_DEV_MODE": "1"}
"""vLLM 0.26.0 mounts ``/collective_rpc`` (and ``/server_info``) only in dev mode (``api_server.build_app``)."""
PLAIN_LOG_ENV = {"NO_COLOR": "1"}
"""Log lines without colour codes, as the soak's ``logscan`` reads them (vLLM's ``logger._use_color``)."""
STOP_GRACE_S = 20.0
"""After SIGTERM, how long a server may take to shut its engine down before its process group is killed."""

PORTS = range(20000, 32000)
"""Where the servers listen: below Linux's ephemeral range (32768-60999 by default), from which the servers' own
random ports (vLLM's distributed init, ZMQ) come, so none of those can take a port handed out here before its
server binds it."""


def free_port(taken: set[int] | None = None) -> int:
    """A bindable localhost port from ``PORTS``, not one of ``taken`` (ports handed out earlier, not bound yet)."""
    taken = set() if taken is None else taken
    start = PORTS.start + (os.getpid() * 37) % len(PORTS)
    for i in range(len(PORTS)):
        port = PORTS.start + (start - PORTS.start + i) % len(PORTS)
        if port in taken:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        taken.add(port)
        return port
    raise OSError(f"no free port in {PORTS.start}-{PORTS.stop - 1}")


def serve_command(args: list[str]) -> list[str]:
    """``vllm serve ARGS`` as this interpreter runs it (the console script's module: on the GPU host vLLM lies on
    ``PYTHONPATH``, its ``vllm`` script on no ``PATH``)."""
    return [sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", *args]


def server_env(variant: str, runner: str, cache_name: str) -> dict[str, str]:
    """The e2e variant's environment (``harness/e2e/configs.py``: its platform and runner switches, isolation, NVLink
    multicast off at any TP) without the offline engine's ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` (``vllm serve`` always
    runs its engine core in a process of its own), a compile cache of its own (servers boot together) and dev mode."""
    from portable_spec_harness.e2e.parent import own_compile_cache, variant_env

    env = {**variant_env(variant, runner), **own_compile_cache(cache_name), **DEV_MODE_ENV, **PLAIN_LOG_ENV}
    env.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)
    return env


def harness_env_keys(cache_name: str) -> frozenset[str]:
    """The keys ``server_env`` sets or drops on purpose, whatever this process's environment holds: every variant's
    switches (each variant's own, the others' dropped), the injected bug (dropped), isolation, the compile cache, dev
    mode and plain logs. ``without_drift`` leaves them as ``server_env`` made them."""
    from portable_spec.envs import INJECT_BUG_ENV
    from portable_spec_harness.e2e.configs import VARIANTS
    from portable_spec_harness.e2e.parent import ISOLATION_ENV, own_compile_cache

    return frozenset({INJECT_BUG_ENV, *(key for v in VARIANTS.values() for key in v.env), *ISOLATION_ENV,
                      *own_compile_cache(cache_name), *DEV_MODE_ENV, *PLAIN_LOG_ENV})


_started: dict[str, str] | None = None


def start_environ() -> dict[str, str] | None:
    """The environment this process was started with: Linux's ``/proc/self/environ``, the block ``exec`` handed it,
    which no ``os.environ`` / ``putenv`` change since reaches. None where it cannot be read (no procfs: not Linux) or
    can no longer be trusted: a process title set since (``setproctitle``, as vLLM sets its own processes' titles)
    overwrites that block together with the command line, so the command line must still read as the one this
    interpreter was started with (``sys.orig_argv``). Read once: a title set later leaves the first reading good."""
    global _started
    if _started is None:
        try:
            block = Path("/proc/self/environ").read_bytes()
            cmdline = Path("/proc/self/cmdline").read_bytes()
        except OSError:
            return None
        if cmdline.split(b"\0")[:-1] != [os.fsencode(arg) for arg in sys.orig_argv]:
            return None
        started: dict[str, str] = {}
        for entry in block.split(b"\0"):
            key, eq, value = entry.partition(b"=")
            if eq and key:
                started.setdefault(os.fsdecode(key), os.fsdecode(value))  # the first of two, as os.environ reads
        _started = started
    return dict(_started)


def environ_drift() -> dict[str, str | None]:
    """The keys of ``os.environ`` this process changed since it started, each with its value at start (None: it had
    none); empty where the start is unknown (``start_environ``).

    Why: importing vLLM and torch writes into ``os.environ`` (vLLM's environment overrides set
    ``TORCHINDUCTOR_COMPILE_THREADS``, ``TORCHINDUCTOR_CACHE_DIR``, ``TRITON_CACHE_AUTOTUNING``,
    ``PYTORCH_NVML_BASED_CUDA_CHECK``, ...). A server that copied the live environment would boot with whatever this
    process happened to import before its launch, and a kept server's environment (``serve_bench.kept_servers``,
    taken at one call's end, after those imports) would never equal the next call's (taken at its boot, before)."""
    started = start_environ()
    if started is None:
        return {}
    live = dict(os.environ)
    return {key: started.get(key) for key in sorted(started.keys() | live.keys()) if started.get(key) != live.get(key)}


def without_drift(env: dict[str, str], explicit: frozenset[str] | set[str] = frozenset()) -> dict[str, str]:
    """``env`` (built from ``os.environ`` plus explicit settings) with what this process changed in its own
    environment since it started (``environ_drift``) undone: each such key ``env`` inherited (its value there is the
    live one) gets its value at start back, or goes where it had none. Keys in ``explicit`` (set or dropped on
    purpose) stay as ``env`` has them. Where the start is unknown, ``env`` as it is."""
    env, live = dict(env), dict(os.environ)
    for key, started in environ_drift().items():
        if key in explicit or env.get(key) != live.get(key):
            continue
        if started is None:
            env.pop(key, None)
        else:
            env[key] = started
    return env


class ServerProcess:
    """One ``vllm serve`` in its own process group (its engine core is a child process), output into ``log``."""

    def __init__(self, command: list[str], env: dict[str, str], log: Path) -> None:
        self.command, self.log = command, log
        self._log = open(log, "w")
        self.proc = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)

    def alive(self) -> bool:
        return self.proc.poll() is None

    @property
    def returncode(self) -> int | None:
        return self.proc.poll()

    def stop(self, grace_s: float = STOP_GRACE_S) -> int | None:
        """SIGTERM (vLLM shuts its engine down), then SIGKILL to the group this object started."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the engine core, if it outlived the server
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        self._log.close()
        return self.proc.returncode


async def health(host: str, port: int, timeout_s: float = 5.0) -> bool:
    """Whether ``GET /health`` answers 200."""
    from portable_spec_harness.soak.http import ProtocolError, fetch

    try:
        return (await fetch(host, port, "GET", "/health", timeout_s=timeout_s)).status == 200
    except (asyncio.TimeoutError, ConnectionError, OSError, ProtocolError):
        return False


async def collective_rpc(host: str, port: int, method: str, kwargs: dict[str, str] | None = None,
                         timeout_s: float = 60.0) -> dict[str, Any] | None:
    """Rank 0's answer to a worker-extension method through vLLM's dev-mode ``POST /collective_rpc`` (which passes
    only string keyword arguments), with every rank's under ``ranks`` at tensor parallel (as ``e2e.child
    .engine_facts`` gives them); None when the call fails or the answer is not a dict."""
    from portable_spec_harness.soak.http import ProtocolError, fetch

    body: dict[str, Any] = {"method": method, "timeout": timeout_s}
    if kwargs:
        body["kwargs"] = kwargs
    try:
        response = await fetch(host, port, "POST", "/collective_rpc", body, timeout_s=timeout_s + 5)
        results = response.json().get("results") if response.status == 200 else None
    except (asyncio.TimeoutError, ConnectionError, OSError, ProtocolError, ValueError):
        return None
    if not isinstance(results, list) or not results or not isinstance(results[0], dict):
        return None
    return {**results[0], "ranks": results} if len(results) > 1 else results[0]


async def wait_healthy(handle: Any, host: str, port: int, log_name: str, deadline: float,
                       every_s: float = 1.0) -> dict[str, Any]:
    """Poll ``/health`` until it answers, the process exits or ``deadline`` (``time.monotonic``) passes; the boot's
    facts: ``ready``, ``seconds``, ``port``, ``log`` and on failure ``error``."""
    started = time.monotonic()
    facts = {"port": port, "log": log_name}
    while time.monotonic() < deadline:
        if not handle.alive():
            return {"ready": False, "error": f"exited with {handle.returncode} while booting",
                    "seconds": round(time.monotonic() - started, 1), **facts}
        if await health(host, port, timeout_s=2.0):
            return {"ready": True, "seconds": round(time.monotonic() - started, 1), **facts}
        await asyncio.sleep(every_s)
    return {"ready": False, "error": "no /health within the boot deadline",
            "seconds": round(time.monotonic() - started, 1), **facts}


def raise_open_file_limit() -> tuple[int, int]:
    """The soft limit on open files up to the hard one: a client holds one socket per request in flight, and
    several servers' bursts and queues can pass 1,024 (a common soft limit). Returns (before, after)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    if wanted > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    return soft, max(soft, wanted)

