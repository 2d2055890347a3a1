"""Tensor parallelism for the harness's ``vllm serve`` processes (the serving soak and the serving benchmark), decided
once: ``--tp N`` and the two switches a host without NVLink multicast needs at TP >= 2, as the servers' command-line
flags.

Why here: the offline engines take the same choice as ``LLM(...)`` keywords (``vllm_door.offline
.parallel_engine_args``); the flags below are derived from those keywords, so a server and an offline engine of one
configuration cannot differ. NVLink multicast itself is kept off in every engine and server, at any TP, by the
isolation environment every variant gets (``vllm_door.offline.MULTICAST_OFF_ENV`` through ``e2e.parent.variant_env``,
which ``vllm_serve.server_env`` starts from); ``as_json`` records it beside the TP.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Any


def add_parallel_flags(parser: argparse.ArgumentParser) -> None:
    """``--tp N`` and the two switches a host without NVLink multicast needs at TP >= 2 (see
    ``portable_spec_harness.vllm_door.offline.parallel_engine_args``). Shared by the e2e child and driver, ``bench
    e2e``, the soak and the serving benchmark."""
    parser.add_argument("--tp", type=int, default=1, help="tensor_parallel_size (default 1)")
    parser.add_argument("--disable-custom-all-reduce", action="store_true",
                        help="vLLM's disable_custom_all_reduce=True (needed at TP>=2 without NVLink multicast)")
    parser.add_argument("--no-fuse-allreduce-rms", action="store_true",
                        help="compilation_config.pass_config.fuse_allreduce_rms=False (same hosts)")


@dataclass(frozen=True)
class Parallel:
    tp: int = 1
    disable_custom_all_reduce: bool = False
    no_fuse_allreduce_rms: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Parallel:
        """From ``add_parallel_flags``' options (``--tp``, ``--disable-custom-all-reduce``,
        ``--no-fuse-allreduce-rms``)."""
        return cls(args.tp, args.disable_custom_all_reduce, args.no_fuse_allreduce_rms)

    def problem(self) -> str | None:
        """Why these options cannot run, as one line naming the fix, or None."""
        if self.tp < 1:
            return f"--tp must be >= 1 (got {self.tp})"
        if self.tp == 1 and (self.disable_custom_all_reduce or self.no_fuse_allreduce_rms):
            return ("--disable-custom-all-reduce and --no-fuse-allreduce-rms are for --tp 2 or more: drop them, or "
                    "pass --tp N")
        return None

    def child_args(self) -> list[str]:
        """The same options as ``add_parallel_flags`` spells them, to pass on to a child that parses them."""
        return (["--tp", str(self.tp)] + (["--disable-custom-all-reduce"] if self.disable_custom_all_reduce else [])
                + (["--no-fuse-allreduce-rms"] if self.no_fuse_allreduce_rms else []))

    def engine_args(self) -> dict[str, Any]:
        """``LLM(...)`` keywords (``parallel_engine_args``)."""
        from portable_spec_harness.vllm_door.offline import parallel_engine_args

        return parallel_engine_args(self.tp, disable_custom_all_reduce=self.disable_custom_all_reduce,
                                    fuse_allreduce_rms=False if self.no_fuse_allreduce_rms else None)

    def serve_args(self) -> list[str]:
        """The same keywords as ``vllm serve`` flags (vLLM 0.26.0's parser: ``tests/test_serve_bench.py`` and
        ``tests/test_soak_vllm_shapes.py`` read them back as engine arguments). Nothing at TP=1 without switches, so
        a TP=1 command line stays what it was."""
        engine = self.engine_args()
        args = ["--tensor-parallel-size", str(self.tp)] if self.tp != 1 else []
        if engine.get("disable_custom_all_reduce"):
            args.append("--disable-custom-all-reduce")
        if "compilation_config" in engine:
            args += ["--compilation-config", json.dumps(engine["compilation_config"])]
        return args

    def as_json(self) -> dict[str, Any]:
        from portable_spec_harness.vllm_door.offline import MULTICAST_OFF_ENV

        return {"tensor_parallel_size": self.tp, "disable_custom_all_reduce": self.disable_custom_all_reduce,
                "fuse_allreduce_rms": False if self.no_fuse_allreduce_rms else None,
                "multicast_off_env": MULTICAST_OFF_ENV}

