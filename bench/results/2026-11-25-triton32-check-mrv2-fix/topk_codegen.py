"""What the top-k/top-p substitute compiles to with the main Triton (3.6), for sm_90 on a CPU: registers, stack and
SASS instructions (the bundled ptxas and cuobjdump) of vLLM's ``_topk_topp_kernel``, the current substitute
(``flip-integer-ternary``, ``unsigned-divisor``) and the first H100 run's form (``tests/topk_int32_dividend.py``), at
the Triton 3.2 check's three launches. Run with the cpu lane's interpreter, PYTHONPATH at the repository root, without
TRITON_INTERPRET."""

import os
import subprocess
import sys
import tempfile

from portable_spec.vllm_adapter.tools.triton_check_worker import enable_vllm_triton

enable_vllm_triton()
import triton  # noqa: E402
import vllm.v1.sample.ops.topk_topp_triton as topk_topp  # noqa: E402

from portable_spec.kernels.derive import derive  # noqa: E402
from portable_spec.kernels.substitutions import SUBSTITUTIONS  # noqa: E402
from portable_spec.kernels.triton_compile import compile_for_target  # noqa: E402
from portable_spec.kernels.triton_table_mrv2 import MRV2_KERNELS  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tests"))
from topk_int32_dividend import first_run_kernel  # noqa: E402


def usage(cubin: bytes) -> str:
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as fh:
        fh.write(cubin)
        fh.flush()
        res = subprocess.run([tool, "-res-usage", fh.name], capture_output=True, text=True, check=True).stdout
        sass = subprocess.run([tool, "-sass", fh.name], capture_output=True, text=True, check=True).stdout
    regs = next(line.strip() for line in res.splitlines() if "REG:" in line).split()
    instructions = sum(1 for line in sass.splitlines() if line.strip().startswith("/*") and line.count("*/") >= 2)
    return f"{regs[0]} {regs[1]} SASS instructions {instructions}"


if __name__ == "__main__":
    entry = next(s for s in SUBSTITUTIONS if s.name == "_topk_topp_kernel")
    shipped = topk_topp._topk_topp_kernel
    variants = {"vllm": shipped, "current substitute": derive(shipped, dict(entry.rewrites)),
                "first run's substitute": first_run_kernel(shipped)}
    print("triton", triton.__version__)
    for case in (c for c in MRV2_KERNELS if c.attr == "_topk_topp_kernel"):
        for name, fn in variants.items():
            kernel = compile_for_target(fn, case.signature, case.constexprs)
            print(f"  {case.key.rpartition('[')[2].rstrip(']')} {name}: {usage(kernel.asm['cubin'])}", flush=True)
