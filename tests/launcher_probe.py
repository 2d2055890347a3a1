"""A Triton kernel launcher as tests build it, through Triton's own ``compile_module_from_src`` (the call its CUDA and
HIP launchers make at a kernel's first launch), on the CPU: the source is a trivial Python C extension with the
launcher's module name, so the real lookup (key: the source's hash; folder: ``TRITON_CACHE_DIR`` at the call) and the
real C compiler run, with no GPU. ``c_builds`` records the folder named at each C build."""

from __future__ import annotations

import os

LAUNCHER_SOURCE = r"""
#include <Python.h>
static struct PyModuleDef launcher = {PyModuleDef_HEAD_INIT, "__triton_launcher", NULL, -1, NULL};
PyMODINIT_FUNC PyInit___triton_launcher(void) { return PyModule_Create(&launcher); }
"""


def build_launcher() -> object:
    """The launcher module for ``LAUNCHER_SOURCE``: from the folder named now where it is there, else compiled."""
    from triton.runtime.build import compile_module_from_src

    return compile_module_from_src(src=LAUNCHER_SOURCE, name="__triton_launcher")


def c_builds(monkeypatch) -> list[str | None]:
    """The list Triton's C builds append ``TRITON_CACHE_DIR`` to, one entry per build (the real build runs)."""
    import triton.runtime.build as build

    seen: list[str | None] = []
    real = build._build

    def counted(*args, **kwargs):
        seen.append(os.environ.get("TRITON_CACHE_DIR"))
        return real(*args, **kwargs)

    monkeypatch.setattr(build, "_build", counted)
    return seen
