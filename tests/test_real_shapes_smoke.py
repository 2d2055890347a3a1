"""The GPU smoke's driver and judge (``harness/real_shapes/smoke.py``) on CPU, against an in-process fake server that
speaks what the smoke reads from ``vllm serve`` (``/health``, ``/v1/completions`` with ``return_token_ids``, the
spec-decode counters of ``/metrics``): a server that serves the design passes; wrong tokens, wrong acceptance and a
missing loader line each fail their own check."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("tokenizers")

from portable_spec_harness.real_shapes import design as D  # noqa: E402
from portable_spec_harness.real_shapes import smoke  # noqa: E402
from portable_spec_harness.real_shapes.build import load  # noqa: E402


class FakeServer:
    """Serves the design for ``--speculative-config``'s head, with one misbehaviour: ``wrong_tokens``,
    ``perfect_acceptance`` (reports the perfect head's counters whatever the head), ``no_loader_line``."""

    def __init__(self, command: list[str], env: dict[str, str], log: Path, misbehave: str = ""):
        self.log, self.misbehave = log, misbehave
        spec = json.loads(command[command.index("--speculative-config") + 1])
        self.k, self.head = spec["num_speculative_tokens"], Path(spec["model"]).name.removeprefix("draft_")
        _, self.design = D.read_marker(command[command.index("serve") + 1])
        self.counts = {"drafts": 0, "accepted": [0] * self.k}
        self.counting = threading.Lock()  # requests arrive on the server's threads; a lost update skews acceptance
        lines = [] if misbehave == "no_loader_line" else [
            smoke.LOADER_LINE.format(role=role) + " (small)" for role in ("target", "eagle3")]
        if env.get("VLLM_PLATFORM") and misbehave != "not_fused":
            lines.append("INFO [fused_chain.py:117] portable_spec: " + smoke.FUSED_LINE + " (forward + greedy sample)")
        log.write_text("\n".join(["INFO starting", *lines]) + "\n")
        assert env["PYTHONPATH"].split(":")[0].endswith("portable_spec_designed_weights_plugin")
        handler = self._handler()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", int(command[command.index("--port") + 1])), handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.returncode = None

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, body: bytes, kind: str = "application/json"):
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                if self.path == "/health":
                    return self._send(b"")
                with fake.counting:
                    drafts, accepted = fake.counts["drafts"], list(fake.counts["accepted"])
                lines = [f'vllm:spec_decode_num_drafts_total{{engine="0"}} {drafts}',
                         f'vllm:spec_decode_num_accepted_tokens_total{{engine="0"}} {sum(accepted)}']
                lines += [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",position="{i}"}} {n}'
                          for i, n in enumerate(accepted)]
                self._send(("\n".join(lines) + "\n").encode(), "text/plain")

            def do_POST(self):
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                head = "perfect" if fake.misbehave == "perfect_acceptance" else fake.head
                sim = D.simulate(fake.design, head, request["prompt"], request["max_tokens"], fake.k)
                with fake.counting:
                    fake.counts["drafts"] += sim["num_drafts"]
                    fake.counts["accepted"] = [a + b for a, b in zip(fake.counts["accepted"],
                                                                     sim["accepted_per_position"])]
                tokens = sim["output"]
                if fake.misbehave == "wrong_tokens":
                    tokens = tokens[:-1] + [tokens[-1] + 1]
                self._send(json.dumps({"choices": [{"text": "", "token_ids": tokens}]}).encode())

        return Handler

    def alive(self) -> bool:
        return self.returncode is None

    def stop(self) -> int:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.returncode = 0
        return 0


def _run(tmp_path, misbehave: str = "", heads=("perfect", "partial"), engine: str = "upstream_v1"):
    def launch(command, env, log):
        return FakeServer(command, env, log, misbehave)

    return smoke.run_smoke(tmp_path, "llama8b_eagle3", list(heads), engine=engine, k=3, max_tokens=48, launch=launch,
                           scale="small")


def test_a_server_that_serves_the_design_passes_every_check(tmp_path):
    report = _run(tmp_path)
    assert report["status"] == "passed", report
    assert json.loads((tmp_path / "smoke.json").read_text()) == report
    for head, run in report["heads"].items():
        checks = run["checks"]
        assert set(checks) == {"greedy output is the designed continuation",
                               "acceptance per position is the designed one",
                               "the designed loader made and checked every model"}
        assert checks["greedy output is the designed continuation"]["compared"] == len(smoke.PROMPT_LENGTHS)
        assert checks["acceptance per position is the designed one"]["compared"] >= 8 * 48 // 4  # one draft per 1 + K tokens at least
    measured = report["heads"]["partial"]["checks"]["acceptance per position is the designed one"]["measured"]
    assert 0.45 < measured[0] < 0.75 and measured[0] > measured[1] > measured[2]
    info = load(tmp_path / "pair")
    assert info["mode"] == "designed" and info["scale"] == "small"


@pytest.mark.parametrize("misbehave,failed", [
    ("wrong_tokens", "greedy output is the designed continuation"),
    ("perfect_acceptance", "acceptance per position is the designed one"),
    ("no_loader_line", "the designed loader made and checked every model"),
])
def test_each_misbehaviour_fails_its_own_check(tmp_path, misbehave, failed):
    heads = ("partial",) if misbehave == "perfect_acceptance" else ("perfect",)
    report = _run(tmp_path, misbehave, heads)
    run = report["heads"][heads[0]]
    assert report["status"] == "failed"
    assert [name for name, c in run["checks"].items() if not c["ok"]] == [failed]


def test_the_judge_fails_on_nothing_compared():
    want = {"outputs": [], "acceptance_per_position": [1.0, 1.0, 1.0]}
    checks = smoke.judge("perfect", [], want, {}, "", ("target", "eagle3"))
    assert not any(c["ok"] for c in checks.values())


def test_bad_arguments_exit_2(tmp_path, capsys):
    assert smoke.main([str(tmp_path), "--heads", "half"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_our_engine_must_log_its_fused_chain(tmp_path):
    """With our FULL drafter as the engine, a server whose log lacks the fused-chain line fails that check alone (and
    the check is not asked of vLLM's own drafter)."""
    ours = _run(tmp_path / "ours", heads=("perfect",), engine="full_drafter")
    assert ours["status"] == "passed", ours
    check = ours["heads"]["perfect"]["checks"]["our fused drafter ran"]
    assert check["ok"] and check["compared"] == 1
    assert ours["heads"]["perfect"]["portable_spec_lines"][0].startswith(smoke.FUSED_LINE)
    broken = _run(tmp_path / "broken", "not_fused", heads=("perfect",), engine="full_drafter")
    assert [n for n, c in broken["heads"]["perfect"]["checks"].items() if not c["ok"]] == ["our fused drafter ran"]
    upstream = _run(tmp_path / "upstream", heads=("perfect",))
    assert "our fused drafter ran" not in upstream["heads"]["perfect"]["checks"]


def test_heads_boot_side_by_side_with_fixed_kv_caches(tmp_path):
    """Both heads' servers are up at once (one boot's wall time), each with a fixed KV cache and a low utilization,
    so vLLM skips memory profiling that a neighbour would disturb, and each with a compile cache of its own."""
    up, most, seen, lock = set(), [0], [], threading.Lock()
    barrier = threading.Barrier(2, timeout=30)

    def launch(command, env, log):
        with lock:
            up.add(log.name)
            most[0] = max(most[0], len(up))
            seen.append((command, env))
        barrier.wait()  # both servers must be launched before either is used
        return FakeServer(command, env, log)

    report = smoke.run_smoke(tmp_path, "llama8b_eagle3", ["perfect", "partial"], k=3, max_tokens=16, launch=launch,
                             scale="small")
    assert report["status"] == "passed", report
    assert most[0] == 2
    caches = set()
    for command, env in seen:
        assert int(command[command.index("--kv-cache-memory-bytes") + 1]) > 0
        assert float(command[command.index("--gpu-memory-utilization") + 1]) <= 0.1
        caches.add(env["VLLM_CACHE_ROOT"])
    assert len(caches) == 2
