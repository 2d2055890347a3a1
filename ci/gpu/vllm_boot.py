#!/usr/bin/env python3
"""Boot vLLM 0.26.0 with a generated tiny Llama + EAGLE head, with and without ``VLLM_PLATFORM=cuda``.

Issue 3 item 5: ``VLLM_PLATFORM=cuda`` boots vLLM through ``vllm.LLM`` and through ``vllm serve`` (one OpenAI chat
request on 127.0.0.1), the logs show our platform class, and the greedy output equals the run without
``VLLM_PLATFORM``. Writes ``OUTDIR/vllm_boot.json`` and ``OUTDIR/vllm_boot_log_excerpt.txt`` (full logs under
``OUTDIR/logs/``). Exit 0 when every check passes, 1 when one fails, 2 on bad arguments.

Each ``vllm.LLM`` configuration runs in its own subprocess (vLLM state is process-global) under a timeout, and
the whole script keeps to ``--budget-s`` (default 540 s, inside a 10-minute device call); the report is rewritten
after every step, so a run cut short still leaves one (``"complete": false``). The zoo pair makes the answer known
in advance: greedy output is the f-chain and, for the perfect/attention heads, every drafted token is accepted
(see harness/portable_spec_harness/model_zoo.py; ``--variant attention`` is the head that needs correct draft attention).

    python ci/gpu/vllm_boot.py OUTDIR [--quick] [--dry-run] [--pair llama_eagle] [--variant perfect|attention]
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform as _platform
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

PROMPTS = ["The quick brown fox", "Hello, my name is", "qua brest 42.", "z"]
CHAT_MESSAGES = [{"role": "user", "content": "Tell me a story about a brown fox."}]
PLATFORM_CLASS = "PortableCudaPlatform"
PLATFORM_MODULE_PREFIX = "portable_spec."
RUNS = (("native", None), ("vllm_platform_cuda", "cuda"))  # (name, VLLM_PLATFORM value)
EXCERPT_PATTERNS = (
    ("platform", re.compile(r"PortableCudaPlatform|Platform plugin \S+ is activated|current_platform=|"
                            r"portable_spec")),
    ("runner", re.compile(r"V2 Model Runner|model_runner|use_v2_model_runner")),
    ("capture", re.compile(r"cudagraph_capture_sizes|cudagraph_mode|Capturing CUDA graphs|Graph capturing finished|"
                           r"max_cudagraph_capture_size")),
    ("spec_decode", re.compile(r"SpecDecoding metrics|spec_decode_num|speculative_config=")),
    ("errors", re.compile(r"Traceback|Error|error:")),
)
EXCERPT_MAX_LINES = 12
EXCERPT_MAX_CHARS = 600


def log(msg: str) -> None:
    print(f"[vllm_boot {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ------------------------------------------------------------------------------------------------ child: vllm.LLM


def _worker_probe(worker: Any) -> dict[str, Any]:
    """Runs inside the vLLM worker (collective_rpc): what the worker actually resolved."""
    from vllm.platforms import current_platform as cp

    def name(obj: Any) -> str | None:
        return None if obj is None else f"{type(obj).__module__}.{type(obj).__qualname__}"

    runner = getattr(worker, "model_runner", None)
    drafter = getattr(runner, "drafter", None) or getattr(runner, "speculator", None)
    cc = worker.vllm_config.compilation_config
    return {
        "platform": name(cp),
        "model_runner": name(runner),
        "drafter": name(drafter),
        "cudagraph_mode": str(cc.cudagraph_mode),
        "cudagraph_capture_sizes": list(cc.cudagraph_capture_sizes or []),
        "max_cudagraph_capture_size": cc.max_cudagraph_capture_size,
    }


def _metric_summary(metrics: list[Any]) -> dict[str, Any]:
    """Sum vLLM's spec-decode counters (``LLM.get_metrics()``) over engines."""
    out: dict[str, Any] = {}
    for m in metrics:
        if not m.name.startswith("vllm:spec_decode"):
            continue
        key = m.name.split(":", 1)[1]
        if hasattr(m, "values"):
            prev = out.get(key, [0] * len(m.values))
            out[key] = [a + b for a, b in zip(prev, m.values)]
        elif hasattr(m, "value"):
            out[key] = out.get(key, 0) + m.value
    return out


def child_llm(spec_path: str) -> int:
    """One ``vllm.LLM`` configuration; writes its result JSON (also on failure)."""
    spec = json.loads(Path(spec_path).read_text())
    result: dict[str, Any] = {"name": spec["name"], "vllm_platform_env": os.environ.get("VLLM_PLATFORM"), "ok": False}
    t0 = time.time()
    try:
        import torch
        import vllm
        import vllm.platforms
        from vllm import LLM, SamplingParams

        result["versions"] = {"vllm": vllm.__version__, "torch": torch.__version__}
        cp = vllm.platforms.current_platform
        result["platform"] = {"qualname": type(cp).__qualname__, "module": type(cp).__module__}
        log(f"current_platform={type(cp).__module__}.{type(cp).__qualname__}")
        llm = LLM(
            model=spec["target"],
            speculative_config=spec["speculative_config"],
            gpu_memory_utilization=spec["gpu_memory_utilization"],
            max_model_len=spec["max_model_len"],
            max_num_seqs=spec["max_num_seqs"],
            enforce_eager=False,
            disable_log_stats=False,
            seed=0,
        )
        result["boot_s"] = round(time.time() - t0, 2)
        result["device"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
        vc = getattr(llm.llm_engine, "vllm_config", None)
        if vc is not None:
            cc = vc.compilation_config
            result["use_v2_model_runner"] = bool(vc.use_v2_model_runner)
            result["compilation"] = {
                "cudagraph_mode": str(cc.cudagraph_mode),
                "cudagraph_capture_sizes": list(cc.cudagraph_capture_sizes or []),
                "max_cudagraph_capture_size": cc.max_cudagraph_capture_size,
            }
            extra = vc.additional_config
            result["additional_config"] = extra if isinstance(extra, dict) else repr(extra)
            log(f"use_v2_model_runner={result['use_v2_model_runner']} compilation={result['compilation']}")
        try:
            result["worker"] = llm.collective_rpc(_worker_probe)
            log(f"worker: {result['worker']}")
        except Exception as exc:  # informative only: the driver-side facts above still stand
            result["worker_error"] = f"{type(exc).__name__}: {exc}"
        t1 = time.time()
        outputs = llm.generate(PROMPTS, SamplingParams(max_tokens=spec["max_tokens"], temperature=0.0))
        result["generate_s"] = round(time.time() - t1, 3)
        result["outputs"] = [
            {"prompt": o.prompt, "prompt_token_ids": list(o.prompt_token_ids),
             "token_ids": list(o.outputs[0].token_ids), "text": o.outputs[0].text}
            for o in outputs
        ]
        try:
            result["spec_decode_metrics"] = _metric_summary(llm.get_metrics())
            llm.llm_engine.do_log_stats()  # puts vLLM's "SpecDecoding metrics" line into the log
        except Exception as exc:
            result["metrics_error"] = f"{type(exc).__name__}: {exc}"
        log(f"spec_decode_metrics={result.get('spec_decode_metrics')}")
        result["ok"] = True
    except BaseException as exc:  # record, then fail the child
        result["error"] = f"{type(exc).__name__}: {exc}"
        result["traceback"] = traceback.format_exc()[-4000:]
        log(f"FAILED: {result['error']}")
    result["wall_s"] = round(time.time() - t0, 2)
    Path(spec["result_path"]).write_text(json.dumps(result, indent=2, default=str))
    sys.stdout.flush()
    os._exit(0 if result["ok"] else 1)  # skip interpreter teardown: vLLM's atexit hooks can hang


# ------------------------------------------------------------------------------------------ pure checks (CPU-tested)


def run_env(base: dict[str, str], vllm_platform: str | None) -> dict[str, str]:
    """The environment of one run: VLLM_PLATFORM set or removed, unbuffered output, callable RPC allowed."""
    env = dict(base)
    env.pop("VLLM_PLATFORM", None)
    if vllm_platform is not None:
        env["VLLM_PLATFORM"] = vllm_platform
    env["PYTHONUNBUFFERED"] = "1"
    env["VLLM_ALLOW_INSECURE_SERIALIZATION"] = "1"  # lets collective_rpc ship _worker_probe
    return env


def check(ok: bool, detail: str) -> dict[str, Any]:
    return {"ok": bool(ok), "detail": detail}


def greedy_checks(runs: dict[str, dict[str, Any]], f: list[int], max_tokens: int) -> dict[str, dict[str, Any]]:
    """Outputs equal across runs, equal to the expected f-chain, and the platforms are the ones asked for."""
    from portable_spec_harness.model_zoo import expected_continuation

    checks: dict[str, dict[str, Any]] = {}
    native, ours = runs.get("native", {}), runs.get("vllm_platform_cuda", {})
    for name, run in runs.items():
        checks[f"{name}_ok"] = check(run.get("ok", False), run.get("error", "ran"))
    if native.get("ok") and ours.get("ok"):
        a = [o["token_ids"] for o in native["outputs"]]
        b = [o["token_ids"] for o in ours["outputs"]]
        diff = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
        checks["greedy_outputs_equal"] = check(
            a == b, "identical token ids" if a == b else f"prompts {diff} differ between native and VLLM_PLATFORM=cuda")
    for name, run in runs.items():
        if not run.get("ok"):
            continue
        bad = [i for i, o in enumerate(run["outputs"])
               if o["token_ids"] != expected_continuation(f, o["prompt_token_ids"], max_tokens)]
        checks[f"{name}_expected_chain"] = check(
            not bad, "every prompt produced the f-chain" if not bad else f"prompts {bad} left the f-chain")
    if ours.get("ok"):
        p = ours.get("platform", {})
        workers = [w.get("platform") for w in ours.get("worker") or []]
        good = p.get("qualname") == PLATFORM_CLASS and str(p.get("module", "")).startswith(PLATFORM_MODULE_PREFIX)
        good_workers = all(str(w).endswith(f".{PLATFORM_CLASS}") for w in workers)
        checks["vllm_platform_cuda_is_ours"] = check(
            good and good_workers, f"driver {p.get('module')}.{p.get('qualname')}; workers {workers or 'not probed'}")
    if native.get("ok"):
        p = native.get("platform", {})
        checks["native_is_stock_vllm"] = check(
            str(p.get("module", "")).startswith("vllm.") and p.get("qualname") != PLATFORM_CLASS,
            f"{p.get('module')}.{p.get('qualname')}")
    return checks


def acceptance_check(metrics: dict[str, Any] | None, expected_per_pos: list[float] | None) -> dict[str, Any]:
    """Perfect heads: per-position accepted counts must equal expected_rate * drafts (rates are 0 or 1)."""
    if expected_per_pos is None:
        return check(True, "no exact expectation for this variant (informational)")
    if not metrics or "spec_decode_num_drafts" not in metrics:
        return check(False, "no spec-decode metrics were reported")
    drafts = int(metrics["spec_decode_num_drafts"])
    drafted = int(metrics.get("spec_decode_num_draft_tokens", 0))
    accepted = int(metrics.get("spec_decode_num_accepted_tokens", 0))
    per_pos = [int(x) for x in metrics.get("spec_decode_num_accepted_tokens_per_pos", [])]
    detail = (f"drafts={drafts} drafted={drafted} accepted={accepted} per_pos={per_pos} "
              f"expected_rates={expected_per_pos}")
    if drafts == 0:
        return check(False, "no drafts were made: speculative decoding did not run; " + detail)
    if len(per_pos) < len(expected_per_pos):
        return check(False, "fewer per-position counters than draft positions; " + detail)
    if all(r == 1.0 for r in expected_per_pos):
        return check(accepted == drafted, detail)
    ones = [i for i, r in enumerate(expected_per_pos) if r == 1.0]
    ok = all(per_pos[i] == drafts for i in ones) and all(
        per_pos[i] == 0 for i in range(len(per_pos)) if i not in ones)
    return check(ok, detail)


def log_excerpt(title: str, text: str) -> list[str]:
    """The lines of a log that show the platform, runner, capture sizes, spec-decode metrics and errors."""
    lines = [ln.strip() for ln in re.split(r"[\r\n]+", text) if ln.strip()]
    out = [f"===== {title} ====="]
    for label, pattern in EXCERPT_PATTERNS:
        hits = [ln for ln in lines if pattern.search(ln)]
        if label == "errors" and not hits:
            continue
        shown = f", first {EXCERPT_MAX_LINES}" if len(hits) > EXCERPT_MAX_LINES else ""
        out.append(f"--- {label} ({len(hits)} matching lines{shown})")
        for ln in hits[:EXCERPT_MAX_LINES]:
            if len(ln) > EXCERPT_MAX_CHARS:
                m = pattern.search(ln)
                start = max(0, m.start() - EXCERPT_MAX_CHARS // 2)
                ln = ("..." if start else "") + ln[start:start + EXCERPT_MAX_CHARS] + "..."
            out.append(ln)
    return out


# ------------------------------------------------------------------------------------------------ parent: planning


def llm_spec(args: argparse.Namespace, pair: dict[str, Any], name: str, work: Path) -> dict[str, Any]:
    return {
        "name": name,
        "target": pair["target"],
        "speculative_config": pair["speculative_config"],
        "gpu_memory_utilization": args.gpu_memory_utilization,
        "max_model_len": args.max_model_len,
        "max_num_seqs": args.max_num_seqs,
        "max_tokens": args.max_tokens,
        "result_path": str(work / f"llm_{name}.result.json"),
    }


def serve_command(args: argparse.Namespace, pair: dict[str, Any]) -> list[str]:
    """``vllm serve`` through a two-line wrapper that first prints the resolved platform class into the log."""
    wrapper = (
        "import sys, vllm.platforms as p; cp = p.current_platform; "
        "print(f'[vllm_boot] api-server current_platform={type(cp).__module__}.{type(cp).__qualname__}', "
        "flush=True); from vllm.entrypoints.cli.main import main; sys.exit(main())"
    )
    return [
        sys.executable, "-c", wrapper, "serve", pair["target"],
        "--speculative-config", json.dumps(pair["speculative_config"]),
        "--host", "127.0.0.1", "--port", str(args.port),
        "--gpu-memory-utilization", str(args.gpu_memory_utilization),
        "--max-model-len", str(args.max_model_len),
        "--max-num-seqs", str(args.max_num_seqs),
        "--seed", "0",
    ]


def plan(args: argparse.Namespace, pair: dict[str, Any], outdir: Path, work: Path) -> list[dict[str, Any]]:
    """Every subprocess this script will start, with the environment changes and timeouts (each is also cut to
    what is left of ``--budget-s`` when it starts). Logs go to OUTDIR/logs, child specs and results to ``work``."""
    steps = []
    for name, value in RUNS:
        spec = llm_spec(args, pair, name, work)
        steps.append({
            "step": f"llm:{name}",
            "env": {"VLLM_PLATFORM": value},
            "command": [sys.executable, str(Path(__file__).resolve()), "--child-llm",
                        str(work / f"llm_{name}.spec.json")],
            "spec": spec,
            "timeout_s": args.llm_timeout,
            "log": str(outdir / "logs" / f"llm_{name}.log"),
        })
    if not args.quick:
        steps.append({
            "step": "serve:vllm_platform_cuda",
            "env": {"VLLM_PLATFORM": "cuda"},
            "command": serve_command(args, pair),
            "timeout_s": args.serve_timeout,
            "log": str(outdir / "logs" / "serve_vllm_platform_cuda.log"),
        })
    return steps


def planned_pair(args: argparse.Namespace) -> dict[str, Any]:
    """Build (or reuse) the zoo pair; on --dry-run only compute where it would go."""
    from portable_spec_harness import model_zoo

    if args.dry_run:
        family, method, _ = model_zoo.PAIRS[args.pair]
        target = Path(args.zoo_dir) / f"{family}_target"
        draft = Path(args.zoo_dir) / f"{family}_{method}_head_{args.variant}"
        return {"pair": args.pair, "variant": args.variant, "target": str(target), "draft": str(draft),
                "speculative_config": {"method": method, "model": str(draft),
                                       "num_speculative_tokens": args.num_speculative_tokens},
                "expected": None}
    return model_zoo.build_pair(args.pair, args.zoo_dir, variant=args.variant,
                                num_speculative_tokens=args.num_speculative_tokens)


# ------------------------------------------------------------------------------------------------ parent: running


def _kill_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)  # the child leads its own session (start_new_session=True)
    except ProcessLookupError:
        pass


def run_llm_step(step: dict[str, Any], deadline: float) -> dict[str, Any]:
    timeout = min(step["timeout_s"], deadline - time.time())
    if timeout < 30:
        log(f"{step['step']}: skipped, --budget-s is spent")
        return {"name": step["spec"]["name"], "ok": False, "error": "skipped: out of --budget-s time"}
    step = {**step, "timeout_s": int(timeout)}
    spec_path = Path(step["command"][-1])
    spec_path.write_text(json.dumps(step["spec"], indent=2))
    result_path = Path(step["spec"]["result_path"])
    result_path.unlink(missing_ok=True)
    env = run_env(dict(os.environ), step["env"]["VLLM_PLATFORM"])
    log(f"{step['step']}: starting (timeout {step['timeout_s']} s, log {step['log']})")
    t0 = time.time()
    with open(step["log"], "w") as fh:
        proc = subprocess.Popen(step["command"], stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            rc = proc.wait(timeout=step["timeout_s"])
        except subprocess.TimeoutExpired:
            _kill_group(proc, signal.SIGKILL)
            proc.wait()
            rc = None
    # whatever the child left behind (engine core, compile workers) goes with its session
    _kill_group(proc, signal.SIGKILL)
    wall = round(time.time() - t0, 1)
    if result_path.is_file():
        result = json.loads(result_path.read_text())
    else:
        result = {"name": step["spec"]["name"], "ok": False,
                  "error": "timed out" if rc is None else f"child exited {rc} without a result"}
    if rc is None:
        result["ok"], result["error"] = False, f"timed out after {step['timeout_s']} s"
    result["subprocess_wall_s"] = wall
    log(f"{step['step']}: {'ok' if result.get('ok') else 'FAILED ' + str(result.get('error'))} in {wall} s")
    return result


def _http(url: str, body: dict[str, Any] | None = None, timeout: float = 10.0) -> tuple[int, str]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"} if data else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def expected_chat(target: str, f: list[int], max_tokens: int) -> dict[str, Any]:
    """The chat prompt's token ids (HF chat template) and the f-chain after it."""
    from transformers import AutoTokenizer

    from portable_spec_harness.model_zoo import expected_continuation

    tok = AutoTokenizer.from_pretrained(target)
    ids = tok.apply_chat_template(CHAT_MESSAGES, add_generation_prompt=True, tokenize=True)
    if isinstance(ids, dict) or hasattr(ids, "keys"):  # transformers 5 returns a BatchEncoding
        ids = ids["input_ids"]
    ids = list(ids)
    chain = expected_continuation(f, ids, max_tokens)
    return {"prompt_token_ids": ids, "token_ids": chain, "text": tok.decode(chain, skip_special_tokens=True)}


def run_serve_step(step: dict[str, Any], args: argparse.Namespace, deadline: float) -> dict[str, Any]:
    shown = step["command"][:2] + ["<wrapper>"] + step["command"][3:]
    result: dict[str, Any] = {"ok": False, "command": shlex.join(shown)}
    health_timeout = min(args.serve_timeout, deadline - time.time() - 60)  # 60 s: request, stats, shutdown
    if health_timeout < 30:
        result["error"] = "skipped: out of --budget-s time"
        return result
    if not _port_free(args.port):
        result["error"] = f"port {args.port} on 127.0.0.1 is in use; pass --port with a free port"
        return result
    env = run_env(dict(os.environ), "cuda")
    base = f"http://127.0.0.1:{args.port}"
    log(f"{step['step']}: starting vllm serve (health timeout {health_timeout:.0f} s, log {step['log']})")
    t0 = time.time()
    with open(step["log"], "w") as fh:
        proc = subprocess.Popen(step["command"], stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            while True:
                if proc.poll() is not None:
                    result["error"] = f"vllm serve exited with {proc.returncode} before /health answered"
                    return result
                if time.time() - t0 > health_timeout:
                    result["error"] = f"/health did not answer within {health_timeout:.0f} s"
                    return result
                try:
                    status, _ = _http(base + "/health", timeout=2.0)
                    if status == 200:
                        break
                except (urllib.error.URLError, OSError):
                    pass
                time.sleep(2.0)
            result["boot_s"] = round(time.time() - t0, 1)
            log(f"{step['step']}: healthy after {result['boot_s']} s")
            _, models = _http(base + "/v1/models")
            model_id = json.loads(models)["data"][0]["id"]
            body = {"model": model_id, "messages": CHAT_MESSAGES, "temperature": 0, "max_tokens": args.serve_max_tokens,
                    "return_token_ids": True}
            t1 = time.time()
            status, text = _http(base + "/v1/chat/completions", body, timeout=45.0)
            result["request_s"] = round(time.time() - t1, 3)
            result["status"] = status
            if status != 200:
                result["error"] = f"chat completion returned HTTP {status}: {text[:300]}"
                return result
            resp = json.loads(text)
            choice = resp["choices"][0]
            result["response"] = {"text": choice["message"]["content"], "token_ids": choice.get("token_ids"),
                                  "prompt_token_ids": resp.get("prompt_token_ids"), "usage": resp.get("usage"),
                                  "finish_reason": choice.get("finish_reason")}
            log(f"{step['step']}: response {result['response']['text']!r}")
            time.sleep(args.serve_metrics_wait)  # let the periodic stats logger print SpecDecoding metrics
            _, prom = _http(base + "/metrics")
            result["spec_decode_metrics_prometheus"] = [
                ln for ln in prom.splitlines() if ln.startswith("vllm:spec_decode") and not ln.startswith("#")][:40]
            result["ok"] = True
        except Exception as exc:
            result["error"] = f"{type(exc).__name__}: {exc}"
        finally:
            _kill_group(proc, signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                _kill_group(proc, signal.SIGKILL)
                proc.wait()
            _kill_group(proc, signal.SIGKILL)
            result["wall_s"] = round(time.time() - t0, 1)
    return result


def serve_checks(serve: dict[str, Any], log_text: str, f: list[int],
                 expected: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The server answered, its log names our platform class, and its greedy tokens are the f-chain after the
    prompt it actually built (vLLM's ``prompt_token_ids``; else our HF chat-template rendering)."""
    from portable_spec_harness.model_zoo import expected_continuation

    checks = {"serve_ok": check(serve.get("ok", False), serve.get("error", "answered one chat request"))}
    checks["serve_log_names_platform_class"] = check(
        PLATFORM_CLASS in log_text, f"{PLATFORM_CLASS!r} {'found' if PLATFORM_CLASS in log_text else 'not found'} "
                                    "in the vllm serve log")
    if not serve.get("ok"):
        return checks
    resp = serve["response"]
    if resp.get("token_ids") is not None and resp.get("prompt_token_ids"):
        want = expected_continuation(f, resp["prompt_token_ids"], len(resp["token_ids"]) or 1)
        same_prompt = expected is not None and resp["prompt_token_ids"] == expected["prompt_token_ids"]
        ok = bool(resp["token_ids"]) and resp["token_ids"] == want
        detail = (f"token ids {'equal' if ok else 'differ from'} the f-chain after vLLM's prompt "
                  f"(prompt {'matches' if same_prompt else 'differs from'} the HF chat template rendering)")
        if not ok:
            detail += f": got {resp['token_ids']}, expected {want}"
    elif expected is not None:
        ok = resp["text"] == expected["text"]
        detail = "text equals the f-chain" if ok else f"got {resp['text']!r}, expected {expected['text']!r}"
    else:
        ok, detail = False, "no token ids in the response and no HF rendering to compare the text with"
    checks["serve_expected_chain"] = check(ok, detail)
    return checks


# ------------------------------------------------------------------------------------------------------------ main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("outdir", nargs="?", help="where vllm_boot.json, the log excerpt and logs/ go")
    parser.add_argument("--quick", action="store_true", help="skip vllm serve")
    parser.add_argument("--dry-run", action="store_true", help="print the planned subprocesses and exit")
    parser.add_argument("--json", action="store_true", help="with --dry-run: print one JSON object")
    parser.add_argument("--zoo-dir", default=str(Path(tempfile.gettempdir()) / "portable_spec_zoo"),
                        help="where the generated models go (default: $TMPDIR/portable_spec_zoo, outside the repo)")
    parser.add_argument("--pair", default="llama_eagle", help="model_zoo pair (default llama_eagle)")
    parser.add_argument("--variant", default="perfect", choices=("perfect", "partial", "attention"),
                        help="zoo draft variant (attention: 100%% acceptance only through correct draft attention)")
    parser.add_argument("--num-speculative-tokens", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--serve-max-tokens", type=int, default=16)
    parser.add_argument("--max-model-len", type=int, default=512)
    parser.add_argument("--max-num-seqs", type=int, default=8)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.3)
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--llm-timeout", type=int, default=300, help="seconds per vllm.LLM subprocess")
    parser.add_argument("--serve-timeout", type=int, default=240, help="seconds for vllm serve to answer /health")
    parser.add_argument("--budget-s", type=int, default=540,
                        help="wall-clock budget for the whole script (default 540: fits a 10-minute device call)")
    parser.add_argument("--serve-metrics-wait", type=float, default=11.0,
                        help="seconds to wait after the request for vLLM's periodic SpecDecoding log line")
    parser.add_argument("--no-acceptance-check", action="store_true",
                        help="report spec-decode acceptance without failing on it")
    parser.add_argument("--child-llm", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_llm is None and not args.outdir:
        parser.error("OUTDIR is required")
    from portable_spec_harness.model_zoo import PAIRS

    if args.pair not in PAIRS:
        parser.error(f"--pair must be one of {', '.join(PAIRS)}")
    if args.variant not in PAIRS[args.pair][2]:
        parser.error(f"pair {args.pair} has no {args.variant} variant; use one of {', '.join(PAIRS[args.pair][2])}")
    return args


def build_report(args: argparse.Namespace, pair: dict[str, Any], steps: list[dict[str, Any]],
                 runs: dict[str, dict[str, Any]], serve: dict[str, Any] | None, t0: float,
                 complete: bool) -> tuple[dict[str, Any], list[str]]:
    """The JSON report and the log excerpt for what has run so far."""
    expected = pair["expected"]
    checks = greedy_checks(runs, expected["f"], args.max_tokens)
    for name, run in runs.items():
        if run.get("ok"):
            acc = acceptance_check(run.get("spec_decode_metrics"), expected["acceptance_per_position"])
            if args.no_acceptance_check:
                acc = check(True, "not enforced (--no-acceptance-check): " + acc["detail"])
            checks[f"{name}_acceptance"] = acc
    excerpt: list[str] = []
    for s in steps:
        if s["step"].startswith("llm:") and s["spec"]["name"] in runs:
            text = Path(s["log"]).read_text(errors="replace") if Path(s["log"]).is_file() else ""
            excerpt += log_excerpt(f"vllm.LLM, {s['step']} (VLLM_PLATFORM={s['env']['VLLM_PLATFORM']})", text) + [""]
            if s["env"]["VLLM_PLATFORM"] == "cuda":
                checks["vllm_platform_cuda_log_names_platform_class"] = check(
                    PLATFORM_CLASS in text, f"{PLATFORM_CLASS!r} {'found' if PLATFORM_CLASS in text else 'not found'}"
                                            " in the VLLM_PLATFORM=cuda vllm.LLM log")
    if serve is not None and "skipped" not in serve:
        log_path = Path(steps[-1]["log"])
        text = log_path.read_text(errors="replace") if log_path.is_file() else ""
        checks.update(serve_checks(serve, text, expected["f"], serve.get("expected")))
        excerpt += log_excerpt("vllm serve (VLLM_PLATFORM=cuda)", text)
    first = next((r for r in runs.values() if r.get("versions")), {})
    report = {
        "schema": 1,
        "complete": complete,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "host": _platform.node(),
        "device": next((r.get("device") for r in runs.values() if r.get("device")), None),
        "versions": {**first.get("versions", {}), "python": _platform.python_version()},
        "args": {k: v for k, v in vars(args).items() if k not in ("child_llm", "dry_run", "json")},
        "pair": {k: v for k, v in pair.items() if k != "expected"},
        "expected": {"acceptance_per_position": expected["acceptance_per_position"],
                     "agreement_on_cycle": expected["agreement_on_cycle"]},
        "runs": runs,
        "serve": serve if serve is not None else {"skipped": "--quick" if args.quick else "not run yet"},
        "greedy_outputs_equal": checks.get("greedy_outputs_equal", {}).get("ok", False),
        "expected_chain_produced": bool(runs) and all(
            v["ok"] for k, v in checks.items() if k.endswith("expected_chain")),
        "checks": checks,
        "ok": complete and all(c["ok"] for c in checks.values()),
        "wall_s": round(time.time() - t0, 1),
    }
    return report, excerpt


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child_llm is not None:
        return child_llm(args.child_llm)
    outdir = Path(args.outdir).resolve()
    pair = planned_pair(args)
    work = Path(tempfile.gettempdir()) / f"vllm_boot-{os.getpid()}"
    steps = plan(args, pair, outdir, work)
    if args.dry_run:
        if args.json:
            print(json.dumps({"pair": {k: v for k, v in pair.items() if k != "expected"}, "steps": steps}))
        else:
            for s in steps:
                env = " ".join(f"{k}={v}" if v is not None else f"-u {k}" for k, v in s["env"].items())
                print(f"{s['step']}: env {env}; timeout {s['timeout_s']} s; log {s['log']}")
                print("  " + shlex.join(s["command"]))
        return 0

    t0 = time.time()
    deadline = t0 + args.budget_s
    (outdir / "logs").mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    log(f"pair {pair['pair']} ({pair['variant']}): target {pair['target']}, draft {pair['draft']}; "
        f"budget {args.budget_s} s")
    runs: dict[str, dict[str, Any]] = {}
    serve: dict[str, Any] | None = {"skipped": "--quick"} if args.quick else None

    def write(complete: bool) -> dict[str, Any]:
        report, excerpt = build_report(args, pair, steps, runs, serve, t0, complete)
        (outdir / "vllm_boot.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
        (outdir / "vllm_boot_log_excerpt.txt").write_text("\n".join(excerpt) + "\n")
        return report

    for step in steps:
        if step["step"].startswith("llm:"):
            runs[step["spec"]["name"]] = run_llm_step(step, deadline)
        else:
            serve = run_serve_step(step, args, deadline)
            try:
                serve["expected"] = expected_chat(pair["target"], pair["expected"]["f"], args.serve_max_tokens)
            except Exception as exc:
                serve["expected"] = None
                serve["expected_error"] = f"{type(exc).__name__}: {exc}"
            log(f"serve: {'ok' if serve.get('ok') else 'FAILED ' + str(serve.get('error'))}")
        write(complete=False)  # a run cut short still leaves a report behind
    report = write(complete=True)
    shutil.rmtree(work, ignore_errors=True)  # child specs and results: both are inside the report
    for name, c in report["checks"].items():
        log(f"{'PASS' if c['ok'] else 'FAIL'} {name}: {c['detail']}")
    log(f"wrote {outdir / 'vllm_boot.json'} and {outdir / 'vllm_boot_log_excerpt.txt'} in {report['wall_s']} s; "
        f"{'all checks passed' if report['ok'] else 'SOME CHECKS FAILED'}")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
