"""Does TRITON_PTXAS_PATH (set by inductor when it compiles) change a Triton kernel's disk-cache key?

Run on the GPU host (no vLLM needed): ``python3 ci/gpu/triton_ptxas_key.py``. It prints the versions of torch's and
Triton's own ``ptxas`` and then builds one small kernel in four fresh processes sharing one empty cache folder, in
turn without and with inductor's ``_set_triton_ptxas_path`` called first (what a boot that compiles the model does
before our warm-ups run). ``cache_entries`` after each: a process that finds its kernel on disk adds none; a
process whose key differs adds one. Why it matters: ``portable_spec/vllm_adapter/worker/triton_cache.py``.

``python3 ci/gpu/triton_ptxas_key.py inductor,pinned,plain`` runs the given modes instead; ``pinned`` calls our
``pin_inductors_ptxas`` for a compiled model first, as our runner does in every boot (a loading boot included): it
must find the ``inductor`` process's kernel on disk where ``plain`` (a loading boot without the pin) does not.
"""
import json, os, subprocess, sys, shutil

CHILD = r'''
import os, sys, json, torch, triton, triton.language as tl
if sys.argv[1] == "inductor":
    from torch._inductor.runtime import compile_tasks as c
    c._set_triton_ptxas_path()
if sys.argv[1] == "pinned":
    from types import SimpleNamespace
    from portable_spec.vllm_adapter.worker.triton_cache import pin_inductors_ptxas
    pin_inductors_ptxas(SimpleNamespace(mode=3, backend=""))
@triton.jit
def k(x, y, n, B: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B)
    m = i < n
    tl.store(y + i, tl.load(x + i, mask=m) * 2, mask=m)
x = torch.ones(1000, device="cuda"); y = torch.empty_like(x)
k[(8,)](x, y, 1000, B=128); torch.cuda.synchronize()
from triton.backends.nvidia import compiler as nc
print(json.dumps({"ptxas_env": os.environ.get("TRITON_PTXAS_PATH"),
                  "ptxas_version": nc.get_ptxas_version(90).splitlines()[-1]}))
'''

if __name__ == "__main__":
    import torch, triton
    from torch._inductor.runtime import compile_tasks as c
    tb = os.path.join(os.path.dirname(torch.__file__), "bin", "ptxas")
    out = {"torch": torch.__version__, "triton": triton.__version__,
           "has_set_ptxas": hasattr(c, "_set_triton_ptxas_path"),
           "has_set_libdevice": hasattr(c, "_set_triton_libdevice_path"),
           "torch_bin_ptxas": os.path.exists(tb)}
    for name, p in (("torch_ptxas", tb), ("triton_ptxas", triton.knobs.nvidia.ptxas.path)):
        try:
            out[name] = subprocess.check_output([p, "--version"]).decode().splitlines()[-1]
        except Exception as e:
            out[name] = repr(e)
    cache = "/tmp/ptxas_key_cache"; shutil.rmtree(cache, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_PTXAS_PATH"}
    env["TRITON_CACHE_DIR"] = cache
    child = "/tmp/ptxas_key_child.py"; open(child, "w").write(CHILD)
    runs = []
    env["PYTHONPATH"] = os.getcwd()  # the repository root: "pinned" imports our pin
    modes = sys.argv[1].split(",") if len(sys.argv) > 1 else ["plain", "inductor", "plain", "inductor"]
    for mode in modes:
        r = subprocess.run([sys.executable, child, mode], env=env, capture_output=True, text=True)
        entries = sorted(os.listdir(cache)) if os.path.isdir(cache) else []
        runs.append({"mode": mode, "rc": r.returncode, "child": r.stdout.strip()[-300:], "err": r.stderr.strip()[-300:],
                     "cache_entries": len(entries)})
    out["runs"] = runs
    print(json.dumps(out, indent=1))
