"""Triton launches recorded, not compiled or run (the compile-key tests): each launch's arguments bound with Triton's
own binder (``create_function_from_signature``, the function ``JITFunction.run`` builds its cache key from:
constexpr values, each argument's type and value/alignment specialization). What compiles depends on those arguments
only, so the distinct keys of a step are the compiles it would cause on a fresh engine; nothing runs, so outputs are
garbage. Two ways in: ``record()`` replaces ``JITFunction.run`` for the whole process (a child without
``TRITON_INTERPRET``: under it ``triton.jit`` builds interpreter functions), ``KeyRecorder`` stands for one kernel
object where its module launches it (``kernel[grid](...)``), ``triton.jit``'s or the interpreter's alike."""

from __future__ import annotations

from triton.backends.compiler import BaseBackend
from triton.runtime import jit

LAUNCHES: list[str] = []
BINDERS: dict[int, object] = {}


def launch_key(jitted: jit.JITFunction, binder, args, kwargs) -> str:
    _, specialization, options = binder(*args, **kwargs)
    return f"{jitted.fn.__name__}|{specialization}|{sorted(options.items())}"


def recording_run(self, *args, grid, warmup, **kwargs):
    """``JITFunction.run`` without the compile and the launch: the key ``run`` would look its kernel up by."""
    binder = BINDERS.get(id(self))
    if binder is None:
        binder = BINDERS[id(self)] = jit.create_function_from_signature(self.signature, self.params, BaseBackend)
    LAUNCHES.append(launch_key(self, binder, args, kwargs))


def record() -> None:
    """From now on every ``triton.jit`` launch of this process is recorded in ``LAUNCHES`` instead of compiled."""
    jit.JITFunction.run = recording_run


class KeyRecorder:
    """Stands for one kernel (a ``JITFunction`` or the interpreter's ``InterpretedFunction`` of the same Python
    function): ``recorder[grid](*args, **options)`` appends the launch's key to ``launches``."""

    def __init__(self, kernel) -> None:
        self.jitted = kernel if isinstance(kernel, jit.JITFunction) else jit.JITFunction(kernel.fn)
        self.binder = jit.create_function_from_signature(self.jitted.signature, self.jitted.params, BaseBackend)
        self.launches: list[str] = []

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.launches.append(launch_key(self.jitted, self.binder, args, kwargs))
