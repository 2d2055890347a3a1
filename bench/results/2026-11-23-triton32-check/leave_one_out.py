"""Each TRITON_ATTN substitute is needed: bind all but one and compile kernel_unified_attention[2d] with the running
Triton (run with the triton==3.2.0 virtualenv's interpreter, PYTHONPATH at the repository root)."""
import importlib, os, tempfile
os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp()
from portable_spec.kernels.triton_check_worker import enable_vllm_triton
enable_vllm_triton()
from portable_spec.kernels import registry
from portable_spec.kernels.substitutions import SUBSTITUTIONS
from portable_spec.kernels.triton_table import KERNELS
from portable_spec.kernels.triton_compile import compile_for_target, first_error_line
case = next(c for c in KERNELS if c.key == "kernel_unified_attention[2d]")
att = [s for s in SUBSTITUTIONS if s.targets[0].startswith("vllm.v1.attention")]
for leave_out in att:
    subs = tuple(s for s in att if s is not leave_out)
    registry.install_substitutions("musa", subs)
    fn = getattr(importlib.import_module(case.module), case.attr)
    try:
        compile_for_target(fn, case.signature, case.constexprs); r = "ok"
    except Exception as e:
        r = first_error_line(e)
    registry.uninstall()
    print(f"without {leave_out.name}: {r}")
