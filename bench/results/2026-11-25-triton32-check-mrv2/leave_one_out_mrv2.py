"""Each Model Runner V2 substitute of the MUSA table is needed: bind all but one and check the MRV2 rows it concerns
with the running Triton (run with the triton==3.2.0 virtualenv's interpreter, PYTHONPATH at the repository root),
both layers: compile for sm_90 and the static MUSA rules."""
import importlib, os, tempfile
os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp()
os.environ.pop("TRITON_INTERPRET", None)
from portable_spec.vllm_adapter.tools.triton_check_worker import enable_vllm_triton
enable_vllm_triton()
import triton
from portable_spec.kernels import registry
from portable_spec.kernels.substitutions import SUBSTITUTIONS
from portable_spec.kernels.triton_compile import compile_for_target, first_error_line
from portable_spec.kernels.triton_rules import scan
from portable_spec.kernels.triton_table_mrv2 import MRV2_KERNELS

MRV2 = ("_load_ptr", "_penalties_kernel", "tl_rand32", "_rejection_kernel", "_topk_topp_kernel")
ROWS = {"_load_ptr": ("_gather_block", "_compute_slot", "[multi-group]"), "_penalties_kernel": ("_penalties",),
        "tl_rand32": ("_rejection_kernel",), "_rejection_kernel": ("_rejection_kernel",),
        "_topk_topp_kernel": ("_topk_topp",)}
print("triton", triton.__version__)
musa = tuple(s for s in SUBSTITUTIONS if "musa" in s.platforms)
for leave_out in MRV2:
    registry.install_substitutions("musa", tuple(s for s in musa if s.name != leave_out))
    try:
        for case in (c for c in MRV2_KERNELS if any(piece in c.key for piece in ROWS[leave_out])):
            fn = getattr(importlib.import_module(case.module), case.attr)
            try:
                compile_for_target(fn, case.signature, case.constexprs, case.options)
                compiled = "ok"
            except Exception as exc:  # the compiler's own error is the result
                compiled = first_error_line(exc)[:110]
            found = scan(fn, case.constexprs)
            static = found.findings[0].line().split(":")[0] if found.findings else "ok"
            print(f"without {leave_out}: {case.key.removeprefix('mrv2/')}: compile {compiled}; static {static}")
    finally:
        registry.uninstall()
