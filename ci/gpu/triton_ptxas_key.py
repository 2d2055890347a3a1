"""Which ``ptxas`` version does a Triton kernel's disk-cache key hold, in a process that compiled with inductor and in
one that did not?

Run on the GPU host (no vLLM needed): ``python3 ci/gpu/triton_ptxas_key.py``. It prints the versions of torch's and
Triton's own ``ptxas`` and then builds one small kernel in fresh processes sharing one empty cache folder, in turn
without and with inductor's ``_set_triton_ptxas_path`` called first. ``cache_entries`` after each: a process that
finds its kernel on disk adds none; a process whose key differs adds one.

``python3 ci/gpu/triton_ptxas_key.py compiled,plain,compiled`` runs the given modes instead: ``compiled`` runs
``torch.compile`` on a small function first (inductor builds and runs a kernel of its own, as a boot that compiles
the model does), ``inductor`` only calls inductor's setter, ``plain`` neither (a boot that loads the compiled model).
Every run reports its kernel's key parts from Triton's compilation listener (the source hash, the options and
variables Triton stores with the kernel, the backend hash with its ``ptxas`` version, whether it came from disk) and
the ``TRITON_*`` variables set when it built; ``key_parts_that_differ`` lists the parts not alike in every run. Why it
matters: ``portable_spec/vllm_adapter/worker/triton_cache.py``.
"""
import json, os, subprocess, sys, shutil

CHILD = r'''
import os, sys, json, torch, triton, triton.language as tl
builds = []
def listen(src, metadata, metadata_group, times, cache_hit):
    from triton.compiler import make_backend
    if getattr(getattr(src, "fn", None), "__name__", "") != "k":
        return
    target = triton.runtime.driver.active.get_current_target()
    builds.append({"cache_hit": bool(cache_hit), "src_hash": src.hash(), "attrs": str(getattr(src, "attrs", "")),
                   "backend_hash": make_backend(target).hash(),
                   "metadata": {k: str(v) for k, v in sorted(metadata.items())
                                if k not in ("shared", "tmem_size", "global_scratch_size", "profile_scratch_size",
                                             "global_scratch_align", "profile_scratch_align", "name")}})
triton.knobs.compilation.listener = listen
if sys.argv[1] == "compiled":
    f = torch.compile(lambda a: (a * 3).sin() + 1)
    f(torch.ones(4096, device="cuda")); torch.cuda.synchronize()
if sys.argv[1] == "inductor":
    from torch._inductor.runtime import compile_tasks as c
    c._set_triton_ptxas_path()
@triton.jit
def k(x, y, n, B: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B)
    m = i < n
    tl.store(y + i, tl.load(x + i, mask=m) * 2, mask=m)
x = torch.ones(1000, device="cuda"); y = torch.empty_like(x)
k[(8,)](x, y, 1000, B=128); torch.cuda.synchronize()
from triton.backends.nvidia import compiler as nc
print(json.dumps({"ptxas_env": os.environ.get("TRITON_PTXAS_PATH"),
                  "ptxas_version": nc.get_ptxas_version(90).splitlines()[-1],
                  "triton_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("TRITON_")},
                  "libdevice_knob": triton.knobs.nvidia.libdevice_path, "builds": builds}))
'''

def differing_key_parts(runs):
    """The key parts (and stored metadata fields) of the runs' kernel builds that are not the same in every run."""
    parts = {}
    for run in runs:
        for build in (run.get("child") or {}).get("builds") or []:
            flat = {k: v for k, v in build.items() if k not in ("metadata", "cache_hit")}
            flat.update({f"metadata.{k}": v for k, v in build["metadata"].items()})
            for k, v in flat.items():
                parts.setdefault(k, []).append(v)
    return {k: v for k, v in parts.items() if len(set(v)) > 1 or len(v) < len(runs)}


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
    modes = sys.argv[1].split(",") if len(sys.argv) > 1 else ["plain", "inductor", "plain", "inductor"]
    for mode in modes:
        r = subprocess.run([sys.executable, child, mode], env=env, capture_output=True, text=True)
        entries = sorted(os.listdir(cache)) if os.path.isdir(cache) else []
        try:
            child_out = json.loads(r.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            child_out = {"unparsed": r.stdout.strip()[-300:]}
        runs.append({"mode": mode, "rc": r.returncode, "child": child_out, "err": r.stderr.strip()[-300:],
                     "cache_entries": len(entries)})
    out["runs"] = runs
    out["key_parts_that_differ"] = differing_key_parts(runs)
    print(json.dumps(out, indent=1))
