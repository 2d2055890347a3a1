"""The named source rewrites ``derive.py`` applies to vLLM's kernels: each takes a kernel's ``ast.FunctionDef``,
changes it in place and returns how many places it changed (``derive`` fails unless that is the expected count).

Each expresses the same program without one construct an older Triton front end rejects:

- ``unannotate-parameters``: ``stride_ks_blk: int | None = None`` -> ``stride_ks_blk=None``. Triton binds parameter
  defaults as annotated assignments; 3.2 evaluates ``int | None`` there and fails ("descriptor '__or__' requires a
  'int' object but received a 'constexpr'"), MUSA's older front end fails on the annotated assignment itself. A
  non-constexpr annotation carries no meaning for either (the parameter stays a runtime argument).
- ``unannotate-assignments``: ``left: tl.int32 = 0`` -> ``left = 0``. MUSA's front end fails with "'AnnAssign'
  object has no attribute 'targets'"; upstream Triton ignores a non-constexpr annotation on an assignment.
- ``split-boolean-chains``: ``A or B or C`` -> ``(A or B) or C``. Triton 3.2 refuses chains of more than two
  operands ("chained boolean operators (A or B or C) are not supported; use parentheses to split the chain").
- ``short-circuit-constexpr-and``: ``FLAG and x`` -> ``(x if FLAG else False)`` where ``FLAG`` is a ``tl.constexpr``
  parameter. Triton >= 3.3 short-circuits a constexpr operand of ``and``; 3.2 does not: it builds ``logical_and``
  of both, so ``if USE_X and t:`` becomes a run-time branch whose body is compiled even when ``USE_X`` is False
  (with ``None`` pointers: "'NoneType' object has no attribute 'type'") or fails MLIR's dominance check ("operand
  #0 does not dominate this use"). A conditional expression on a constexpr selects its branch at compile time in
  every Triton, which is what >= 3.3 does with the ``and``.
- ``unsigned-divisor``: ``(n + T - 1) // T`` -> ``(n + T - 1) // tl.cast(T, tl.uint32)`` where ``n`` is a uint32
  count (assigned from ``tl.zeros(..., dtype=tl.uint32)``). Triton >= 3.2 gives an int literal the other operand's
  type; older front ends (MUSA's) make it int32 and refuse to divide uint32 by int32 ("Cannot use /, #, or % with
  triton.language.uint32 and triton.language.int32 because they have different signedness"; vllm-musa patches these
  lines). A uint32 divisor is what >= 3.2 builds from the literal, so the division stays unsigned: on Triton 3.6 the
  derived top-k/top-p kernel compiles to vLLM's PTX line for line. (Casting the dividend to int32 instead, as
  vllm-musa does, makes a signed division that changes the loop code around it, and the kernel slower than vLLM's.)
- ``flip-integer-ternary``: ``a if n > k else b`` -> ``b if n <= k else a`` where ``n`` is an unsigned count
  (integers: the negated comparison is exact). Triton 3.2's ``TritonGPUCombineTensorSelectAndIf`` pass moves a select
  on condition ``c`` into a later ``if`` on the same ``c`` and breaks dominance ("operand #0 does not dominate this
  use"); the top-k/top-p kernel selects its pivot on ``n > k`` and then branches on ``n > k`` (vllm-musa rewrites
  the same lines). On the negated comparison the select's condition is another value, which the pass leaves alone.
- ``rand-offsets-two-words``: ``tl.rand(seed, offset)`` -> ``tl.uint_to_uniform_float(tl.philox(seed, lo, hi, 0,
  0)[0])`` with ``lo`` the offset's low 32 bits and ``hi`` its high 32 bits (0 for an offset of 32 bits or fewer);
  ``tl.randint`` likewise without the float conversion, ``tl.randint4x`` likewise with all four results. Triton 3.2
  draws from an int64 offset with a 64-bit Philox whose result is a block of one element, not a scalar (so ``u`` in
  a branch no longer matches the other branch: "the else block redefines it as <[1], int1>"), of 64-bit words (a
  caller that bitcasts one to 32 bits fails: "Cannot bitcast data-type of size 64 to data-type of size 32"), and
  other numbers. Triton >= 3.3 draws from the offset's two 32-bit
  halves as Philox counter words; passing both halves explicitly as uint32 draws exactly those numbers on both, for
  every offset (positions past 2**32 and negative int64 values included). The offset must be a plain name (it is
  read five times).
- ``branch-values-to-where``: ``if c: a = x1; b = y1 else: a = x2; b = y2`` -> ``a = tl.where(c, x1, x2); b =
  tl.where(c, y1, y2)``, for a run-time ``if`` (its test names no ``tl.constexpr`` parameter) whose two branches
  only assign the same names, in the same order, from call-free expressions (pointer arithmetic and comparisons:
  evaluating the branch not taken reads nothing and writes nothing). Triton 3.2's AMD backend rejects a pointer
  chosen in a run-time branch and used after it ("operand #0 does not dominate this use": its pointer
  canonicalization rewrites the ``scf.if`` that yields the pointer after the use it moved); MRV2's
  ``_fill_logprob_token_ids_kernel`` picks its source row that way. A select computes the same values on every
  backend.
- ``guarded-load-to-masked-load``: ``tl.load(p) if c else k`` -> ``tl.load(p, mask=c, other=k)`` for a run-time
  ``c`` (its test names no ``tl.constexpr`` parameter), a load of one pointer argument and a constant ``k``. Triton
  builds the conditional expression as an ``scf.if`` that yields the loaded value; Triton 3.2's AMD backend rejects
  MRV2's staged write (vLLM 0.33.0's ``_apply_write_kernel``, ``tl.load(write_cu_lens_ptr + pid - 1) if pid > 0
  else 0``) with "operand #1 does not dominate this use" where its NVIDIA backend accepts it. A masked load reads
  ``p`` where ``c`` holds and gives ``k`` (cast to the loaded type, as the ``if`` unifies it) where it does not, with
  no branch: the same value, and the address the ``if`` skips is not read either.
- ``mul-call-to-operator``: ``tl.mul(a, b, sanitize_overflow=False)`` -> ``a * b``. ``tl.mul`` is Triton >= 3.3's;
  3.2 has no such name and fails on it while it hashes a kernel's dependencies, before any ``if`` on a constexpr
  prunes the call (vLLM 0.33.0's watermark helper ``_mulhilo32``, reached from MRV2's resample kernel even with
  watermarking off). Without the debug mode that turns overflow checks on, 3.2's ``*`` is the same wrapping
  multiply in the operands' promoted type.
- ``if-to-where``: ``if c: x = v`` (no ``else``) -> ``x = tl.where(c, v, x)``, for a run-time ``c`` (a constexpr
  operand of an ``and`` stays a compile-time ``if`` around the result: ``if c and FLAG:`` -> ``if FLAG: x = ...``).
  Each assignment to a name bound outside the ``if`` (a parameter, or a name assigned elsewhere in the function)
  selects its new value where ``c`` holds and keeps the old one elsewhere; an assignment to a name bound only inside
  the ``if`` (the branch's own temporary, e.g. the noise drawn into ``gumbel_noise``) runs unconditionally, as do
  constexpr ``if``s in the body, whose branches are rewritten the same way. Where ``c`` holds every name gets the
  branch's value, computed from the same values; where it does not, every name bound outside keeps its value, so
  the program is the same. Only an ``if`` whose body is made of such assignments (and constexpr ``if``s) is
  rewritten; any other ``if`` is left alone (uncounted). An ``if`` of that form is refused (``RewriteRefused``) when
  running its body unconditionally could do something the branch did not: a call not known to be side-effect free
  (``PURE_CALLS``; a load could read an address the branch guards) or a body that assigns a name the condition
  reads. Triton 3.2's AMD backend rejects vLLM >= 0.28's Gumbel helper ``gumbel_noised_argmax`` (inlined in
  DFlash2's ``_selector_walk_kernel``) with "operand #0 does not dominate this use": its two run-time branches on
  ``temp != 0.0`` without ``else`` (the division by the temperature; the noise draw and masked add). With both
  selected, it compiles.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable

from portable_spec.errors import PortableSpecError


class RewriteRefused(PortableSpecError):
    """A rewrite found its pattern but cannot express it safely (``derive`` names the kernel and the fix)."""


def _constexpr(annotation: ast.expr) -> bool:
    return ast.unparse(annotation).split(".")[-1] == "constexpr"


def constexpr_parameters(func: ast.FunctionDef) -> set[str]:
    """Parameters annotated ``tl.constexpr``."""
    return {a.arg for a in func.args.args if a.annotation is not None and _constexpr(a.annotation)}


def unsigned_names(func: ast.FunctionDef) -> set[str]:
    """Local names assigned a uint32/uint64 value somewhere in ``func``: ``tl.zeros(..., dtype=tl.uint32)``,
    ``tl.full(..., dtype=...)``, ``tl.cast(x, tl.uint32)`` or ``x.to(tl.uint32)`` (a source-level approximation of
    Triton's types, enough for the counters vLLM's kernels keep)."""
    names = set()
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and _is_unsigned_value(node.value):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _is_unsigned_value(value: ast.expr) -> bool:
    if not isinstance(value, ast.Call):
        return False
    text = [ast.unparse(a) for a in value.args] + [ast.unparse(k.value) for k in value.keywords]
    return any(t.split(".")[-1] in ("uint32", "uint64") for t in text)


def mentions(node: ast.AST, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))


def _cast_to_signed(node: ast.expr) -> bool:
    """``x.to(tl.int32)`` or ``tl.cast(x, tl.int32)`` (any signed integer type)."""
    if not isinstance(node, ast.Call):
        return False
    name = ast.unparse(node.func)
    target = node.args[0] if name.endswith(".to") and node.args else (
        node.args[1] if name.split(".")[-1] == "cast" and len(node.args) > 1 else None)
    return target is not None and ast.unparse(target).split(".")[-1] in ("int8", "int16", "int32", "int64")


def divides_unsigned_by_signed(node: ast.AST, unsigned: set[str]) -> bool:
    """``x // c`` or ``x % c`` with ``x`` computed from an unsigned name (and not cast to a signed type) and ``c`` an
    int literal or a name that is not unsigned (a constexpr or a signed value)."""
    return (isinstance(node, ast.BinOp) and isinstance(node.op, (ast.FloorDiv, ast.Mod))
            and mentions(node.left, unsigned) and not _cast_to_signed(node.left)
            and isinstance(node.right, (ast.Name, ast.Constant)) and not mentions(node.right, unsigned))


def _unannotate_parameters(func: ast.FunctionDef) -> int:
    args = func.args.args
    with_default = {a.arg for a in args[len(args) - len(func.args.defaults):]}
    changed = 0
    for arg in args:
        if arg.annotation is not None and arg.arg in with_default and not _constexpr(arg.annotation):
            arg.annotation = None
            changed += 1
    return changed


class _Counting(ast.NodeTransformer):
    changed = 0


class _Unannotate(_Counting):
    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        if _constexpr(node.annotation) or node.value is None:
            return node
        self.changed += 1
        return ast.copy_location(ast.Assign(targets=[node.target], value=node.value), node)


class _SplitChains(_Counting):
    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        self.generic_visit(node)
        if len(node.values) <= 2:
            return node
        self.changed += 1
        left = node.values[0]
        for value in node.values[1:]:
            left = ast.BoolOp(op=node.op, values=[left, value])
        return ast.copy_location(left, node)


class _WithFlags(_Counting):
    """A rewrite that needs the kernel's ``tl.constexpr`` parameters (``flags``)."""

    def __init__(self, flags: set[str]) -> None:
        self.flags = flags

    def runtime_test(self, test: ast.expr) -> bool:
        """A condition Triton evaluates at run time (it names no flag) that calls nothing."""
        return not mentions(test, self.flags) and not any(isinstance(n, ast.Call) for n in ast.walk(test))


class _ShortCircuit(_WithFlags):
    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        self.generic_visit(node)
        first = node.values[0]
        if not (isinstance(node.op, ast.And) and isinstance(first, ast.Name) and first.id in self.flags):
            return node
        self.changed += 1
        rest = node.values[1:]
        body = rest[0] if len(rest) == 1 else ast.BoolOp(op=ast.And(), values=rest)
        return ast.copy_location(ast.IfExp(test=first, body=body, orelse=ast.Constant(False)), node)


class _UnsignedDivisor(_Counting):
    def __init__(self, unsigned: set[str]) -> None:
        self.unsigned = unsigned

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        if not divides_unsigned_by_signed(node, self.unsigned):
            return node
        self.changed += 1
        node.right = ast.Call(func=ast.parse("tl.cast", mode="eval").body,
                              args=[node.right, ast.parse("tl.uint32", mode="eval").body], keywords=[])
        return node


_NEGATED = {ast.Gt: ast.LtE, ast.GtE: ast.Lt, ast.Lt: ast.GtE, ast.LtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq}


class _FlipTernary(_Counting):
    def __init__(self, unsigned: set[str]) -> None:
        self.unsigned = unsigned

    def visit_IfExp(self, node: ast.IfExp) -> ast.AST:
        self.generic_visit(node)
        test = node.test
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _NEGATED
                and mentions(test.left, self.unsigned)):
            return node
        self.changed += 1
        flipped = ast.Compare(left=test.left, ops=[_NEGATED[type(test.ops[0])]()], comparators=test.comparators)
        return ast.copy_location(ast.IfExp(test=flipped, body=node.orelse, orelse=node.body), node)


_FOUR_WORDS = ("tl.philox({seed}, {o}.to(tl.uint32), ({o} >> 32).to(tl.uint32)"
               " if tl.constexpr({o}.dtype.primitive_bitwidth) > 32 else {o}.to(tl.uint32) * 0,"
               " {o}.to(tl.uint32) * 0, {o}.to(tl.uint32) * 0)")
"""Triton >= 3.3's ``randint4x`` draw, spelled out: Philox on the offset's low and high 32-bit words (a zero high
word for an offset of 32 bits or fewer) and two zero words, all four results."""
_TWO_WORDS = _FOUR_WORDS + "[0]"
"""The same draw's first result: what ``tl.randint`` (and, as a float, ``tl.rand``) returns."""


class _RandTwoWords(_Counting):
    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        name = ast.unparse(node.func)
        if name not in ("tl.rand", "tl.randint", "tl.randint4x") or len(node.args) != 2 or node.keywords:
            return node
        seed, offset = node.args
        if not isinstance(offset, ast.Name):
            return node  # not counted: derive fails on the count, naming the kernel
        self.changed += 1
        draw = (_FOUR_WORDS if name == "tl.randint4x" else _TWO_WORDS).format(seed=ast.unparse(seed), o=offset.id)
        text = f"tl.uint_to_uniform_float({draw})" if name == "tl.rand" else draw
        return ast.copy_location(ast.parse(text, mode="eval").body, node)


def _branch_assignments(block: list[ast.stmt]) -> list[tuple[str, ast.expr]] | None:
    """``[(name, value), ...]`` when ``block`` only assigns call-free values to plain names, else None."""
    pairs = []
    for stmt in block:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                and not any(isinstance(n, ast.Call) for n in ast.walk(stmt.value))):
            return None
        pairs.append((stmt.targets[0].id, stmt.value))
    return pairs


def _where(cond: ast.expr, value: ast.expr, other: ast.expr) -> ast.Call:
    """``tl.where(cond, value, other)``, the select every branch rewrite here emits."""
    return ast.Call(func=ast.parse("tl.where", mode="eval").body, args=[cond, value, other], keywords=[])


class _BranchToWhere(_WithFlags):
    def visit_If(self, node: ast.If) -> ast.AST | list[ast.stmt]:
        self.generic_visit(node)
        then, other = _branch_assignments(node.body), _branch_assignments(node.orelse)
        if (not then or not other or [n for n, _ in then] != [n for n, _ in other]
                or not self.runtime_test(node.test)):
            return node
        self.changed += 1
        return [ast.copy_location(ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())],
                                             value=_where(node.test, a, b)), node)
                for (name, a), (_, b) in zip(then, other)]


class _GuardedLoad(_WithFlags):
    def visit_IfExp(self, node: ast.IfExp) -> ast.AST:
        self.generic_visit(node)
        load = node.body
        if not (isinstance(load, ast.Call) and ast.unparse(load.func) == "tl.load" and len(load.args) == 1
                and not load.keywords and isinstance(node.orelse, ast.Constant) and self.runtime_test(node.test)):
            return node
        self.changed += 1
        return ast.copy_location(ast.Call(func=load.func, args=load.args, keywords=[
            ast.keyword(arg="mask", value=node.test), ast.keyword(arg="other", value=node.orelse)]), node)


class _MulCall(_Counting):
    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        unchecked = [k for k in node.keywords if k.arg == "sanitize_overflow"]
        if not (ast.unparse(node.func) == "tl.mul" and len(node.args) == 2 and len(node.keywords) == 1 and unchecked
                and isinstance(unchecked[0].value, ast.Constant) and unchecked[0].value.value is False):
            return node
        self.changed += 1
        return ast.copy_location(ast.BinOp(left=node.args[0], op=ast.Mult(), right=node.args[1]), node)


_TL_NAMESPACES = ("tl", "tl.math", "tldevice", "libdevice")
_TL_EFFECTS = ("load", "store", "device_print", "device_assert", "static_print", "static_assert", "debug_barrier",
               "inline_asm_elementwise", "make_tensor_descriptor", "load_tensor_descriptor",
               "store_tensor_descriptor")
"""Triton builtins that read or write memory, print, assert, synchronize or run arbitrary code (``atomic_*`` too):
evaluated outside their branch they could fault or act where vLLM's kernel does not."""
PURE_CALLS = frozenset({"tl_rand32", "tl_rand64", "murmur3_uniform32", "murmur3_uniform64", "_log1p_neg_stable"})
"""vLLM's ``@triton.jit`` helpers (``sample/gumbel.py``) that ``if-to-where`` may run outside their branch: each
computes a random number or a logarithm from its arguments and touches no memory (read in vLLM 0.28.0's and
0.33.0's source). Any other helper call in a branch is refused, not guessed."""


def _pure_call(call: ast.Call) -> bool:
    """Whether evaluating ``call`` outside its branch changes nothing but the value it returns."""
    func = call.func
    if isinstance(func, ast.Attribute):
        if func.attr == "to":
            return True  # a cast
        return (ast.unparse(func.value) in _TL_NAMESPACES and func.attr not in _TL_EFFECTS
                and not func.attr.startswith("atomic"))
    if isinstance(func, ast.Name):
        constant = all(isinstance(a, ast.Constant) for a in call.args) and not call.keywords
        return func.id in PURE_CALLS or (func.id in ("float", "int") and constant)
    return False


def _compile_time(test: ast.expr, flags: set[str]) -> bool:
    """A test on ``tl.constexpr`` parameters alone (``FLAG``, ``not FLAG``): Triton decides it when compiling."""
    names = [n.id for n in ast.walk(test) if isinstance(n, ast.Name)]
    return bool(names) and set(names) <= flags and not any(isinstance(n, ast.Call) for n in ast.walk(test))


class _IfToWhere(_WithFlags):
    def __init__(self, func: ast.FunctionDef) -> None:
        super().__init__(constexpr_parameters(func))
        self.func = func

    def split(self, test: ast.expr) -> tuple[list[ast.expr], ast.expr] | None:
        """``(compile-time operands, run-time condition)`` of an ``if`` test, or None when it is not a run-time test
        this rewrite can select on (a constexpr test, or one mixing both in one operand)."""
        parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
        fixed = [p for p in parts if _compile_time(p, self.flags)]
        runtime = [p for p in parts if p not in fixed]
        if not runtime or not all(self.runtime_test(p) for p in runtime):
            return None
        return fixed, runtime[0] if len(runtime) == 1 else ast.BoolOp(op=ast.And(), values=runtime)

    def assignments_only(self, body: list[ast.stmt]) -> bool:
        """Whether ``body`` only assigns plain names (in constexpr ``if``s too)."""
        for stmt in body:
            if isinstance(stmt, ast.If) and _compile_time(stmt.test, self.flags):
                if not (self.assignments_only(stmt.body) and self.assignments_only(stmt.orelse)):
                    return False
            elif not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                      and isinstance(stmt.targets[0], ast.Name)):
                return False
        return True

    def bound_outside(self, node: ast.If) -> set[str]:
        """Parameters and names the function binds outside ``node``."""
        inside = {id(n) for n in ast.walk(node)}
        stored = {n.id for n in ast.walk(self.func)
                  if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and id(n) not in inside}
        return stored | {a.arg for a in self.func.args.args}

    def select(self, body: list[ast.stmt], cond: ast.expr, kept: set[str]) -> list[ast.stmt]:
        """``body`` run unconditionally: names in ``kept`` take their new value only where ``cond`` holds."""
        out = []
        for stmt in body:
            if isinstance(stmt, ast.If):
                stmt.body = self.select(stmt.body, cond, kept)
                stmt.orelse = self.select(stmt.orelse, cond, kept)
            else:
                name = stmt.targets[0].id
                if name in kept:
                    stmt.value = _where(copy.deepcopy(cond), stmt.value, ast.Name(id=name, ctx=ast.Load()))
            out.append(stmt)
        return out

    def refuse_unsafe(self, node: ast.If, cond: ast.expr) -> None:
        text = f"'if {ast.unparse(node.test)}:'"
        impure = [ast.unparse(c.func) for s in node.body for c in ast.walk(s)
                  if isinstance(c, ast.Call) and not _pure_call(c)]
        if impure:
            raise RewriteRefused(f"if-to-where: {text} calls {', '.join(sorted(set(impure)))}, not known to be "
                                 "side-effect free (PURE_CALLS), so its body cannot run unconditionally")
        assigned = {n.id for s in node.body for n in ast.walk(s) if isinstance(n, ast.Name)
                    and isinstance(n.ctx, ast.Store)}
        read = assigned & {n.id for n in ast.walk(cond) if isinstance(n, ast.Name)}
        if read:
            raise RewriteRefused(f"if-to-where: {text} assigns {', '.join(sorted(read))}, which its condition reads")

    def visit_If(self, node: ast.If) -> ast.AST | list[ast.stmt]:
        self.generic_visit(node)
        split = None if node.orelse else self.split(node.test)
        if split is None or not node.body or not self.assignments_only(node.body):
            return node
        fixed, cond = split
        self.refuse_unsafe(node, cond)
        self.changed += 1
        body = self.select(node.body, cond, self.bound_outside(node))
        if not fixed:
            return body
        test = fixed[0] if len(fixed) == 1 else ast.BoolOp(op=ast.And(), values=fixed)
        return ast.copy_location(ast.If(test=test, body=body, orelse=[]), node)


def _run(visitor: _Counting, func: ast.FunctionDef) -> int:
    visitor.visit(func)
    return visitor.changed


REWRITES: dict[str, Callable[[ast.FunctionDef], int]] = {
    "unannotate-parameters": _unannotate_parameters,
    "unannotate-assignments": lambda func: _run(_Unannotate(), func),
    "split-boolean-chains": lambda func: _run(_SplitChains(), func),
    "short-circuit-constexpr-and": lambda func: _run(_ShortCircuit(constexpr_parameters(func)), func),
    "unsigned-divisor": lambda func: _run(_UnsignedDivisor(unsigned_names(func)), func),
    "flip-integer-ternary": lambda func: _run(_FlipTernary(unsigned_names(func)), func),
    "rand-offsets-two-words": lambda func: _run(_RandTwoWords(), func),
    "branch-values-to-where": lambda func: _run(_BranchToWhere(constexpr_parameters(func)), func),
    "guarded-load-to-masked-load": lambda func: _run(_GuardedLoad(constexpr_parameters(func)), func),
    "mul-call-to-operator": lambda func: _run(_MulCall(), func),
    "if-to-where": lambda func: _run(_IfToWhere(func), func),
}
