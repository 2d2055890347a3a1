"""Substitutes derived from vLLM's own Triton source by named, counted rewrites, for code too large to copy.

vLLM's larger kernels (TRITON_ATTN's unified attention, ~500 lines plus helpers; Model Runner V2's rejection kernel;
the top-k/top-p sampler, ~800 lines) use a few constructs older Triton front ends reject. Each rewrite
(``derive_rewrites.REWRITES``, which says what each one changes and why) expresses the same program without one of
them; an entry in ``substitutions.py`` names the rewrites and how many places each must change.

``unspecialize`` rewrites no source: it names integer parameters Triton must not specialize (``do_not_specialize``),
so one compiled variant serves every value (CUDA's batch-size arguments, ``substitutions.py``).

A derived function is compiled in the ORIGINAL's module globals (its helper calls resolve where vLLM's do, helper
substitutes included) but reports ``portable_spec.derived.<module>`` as its module, so Triton's IR and hashes name
it as ours. Each rewrite must change exactly the expected number of places: if vLLM's source changed, deriving fails
with one line instead of guessing; so does a rewrite that finds its pattern but cannot express it safely
(``RewriteRefused``).

A ``@triton.jit`` helper is derived like a kernel, and reaches a kernel that inlines it by being bound where that
kernel looks it up: Triton resolves a callee in the CALLER's module globals when the caller compiles, so binding the
derived helper on the caller's module (``substitutions.py``: e.g. DFlash2's selector walk calls the derived Gumbel
helper bound in its own module) substitutes it for that caller only, vLLM's kernel itself unchanged.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import linecache
import textwrap
from collections.abc import Mapping
from typing import Any

from portable_spec.errors import PortableSpecError
from portable_spec.kernels.derive_rewrites import REWRITES, RewriteRefused

DERIVED_MARK = "__portable_spec_derived_from__"
DERIVED_MODULE_PREFIX = "portable_spec.derived."


class DerivationError(PortableSpecError):
    """vLLM's kernel source is not what a rewrite expects."""


def derive(original: Any, rewrites: Mapping[str, int], unspecialize: tuple[str, ...] = ()) -> Any:
    """A new Triton JIT function from ``original``'s source after ``rewrites`` (name -> exact number of places it
    must change), not specialized on the parameters ``unspecialize`` names (besides those ``original`` already
    leaves alone). ``original`` is a JIT function, or vLLM's plain function where vLLM runs without Triton."""
    import triton

    unknown = sorted(set(rewrites) - set(REWRITES))
    if unknown:
        raise DerivationError(f"unknown rewrite(s) {', '.join(unknown)}; known: {', '.join(REWRITES)}")
    fn = getattr(original, "fn", original)
    qualified = f"{fn.__module__}:{fn.__name__}"
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    func = tree.body[0]
    if not isinstance(func, ast.FunctionDef) or func.name != fn.__name__:
        raise DerivationError(f"cannot read the source of {qualified}; pin vllm==0.26.0")
    func.decorator_list = []
    params = [arg.arg for arg in func.args.args]
    missing = [name for name in unspecialize if name not in params]
    if missing:
        raise DerivationError(f"{qualified} has no parameter {', '.join(missing)}: vLLM changed the kernel; update "
                              "portable_spec/kernels/substitutions.py or pin vllm==0.26.0")
    for name, expected in rewrites.items():
        try:
            changed = REWRITES[name](func)
        except RewriteRefused as exc:
            raise DerivationError(f"{qualified}: {exc}; update portable_spec/kernels/substitutions.py or pin "
                                  "vllm==0.26.0") from None
        if changed != expected:
            raise DerivationError(f"{name} changed {changed} place(s) in {qualified}, expected {expected}: vLLM "
                                  "changed the kernel; update portable_spec/kernels/substitutions.py or pin "
                                  "vllm==0.26.0")
    source = ast.unparse(ast.fix_missing_locations(tree)) + "\n"
    # The source's hash in the name: Triton's interpreter reads a kernel's source back through linecache, so two
    # derivations of one kernel (other rewrites) under one name would each run the later one's code.
    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    filename = f"<portable_spec: derived {qualified} {digest}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict[str, Any] = {}
    exec(compile(source, filename, "exec"), fn.__globals__, namespace)  # noqa: S102 - vLLM's own source, rewritten
    new_fn = namespace[fn.__name__]
    new_fn.__module__ = DERIVED_MODULE_PREFIX + fn.__module__
    setattr(new_fn, DERIVED_MARK, qualified)
    options = {k: list(getattr(original, k)) for k in ("do_not_specialize", "do_not_specialize_on_alignment")
               if getattr(original, k, None)}
    if unspecialize:
        kept = options.get("do_not_specialize", [])
        options["do_not_specialize"] = kept + [name for name in unspecialize if name not in kept]
    return triton.jit(new_fn, **options)
