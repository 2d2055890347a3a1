"""Extra launch variants of DFlash2's selector walk (greedy; probabilistic fp64), for a one-off --cases check."""
import dataclasses

from portable_spec.kernels.triton_table_mrv2 import MRV2_KERNELS

_ROW = next(c for c in MRV2_KERNELS if c.key.endswith("._selector_walk_kernel"))
VARIANTS = (
    dataclasses.replace(_ROW, key=_ROW.key + "[greedy]", constexprs={**_ROW.constexprs, "SAMPLE_PROBABILISTIC": False}),
    dataclasses.replace(_ROW, key=_ROW.key + "[fp64]", constexprs={**_ROW.constexprs, "USE_FP64": True}),
    dataclasses.replace(_ROW, key=_ROW.key + "[greedy-fp64]",
                        constexprs={**_ROW.constexprs, "USE_FP64": True, "SAMPLE_PROBABILISTIC": False}),
)
