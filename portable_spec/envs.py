"""Every environment variable portable_spec reads, in one place, each with its default and meaning.

As vLLM's ``envs.py`` and vllm-ascend's: nothing else in the package reads ``os.environ`` for a value
(``tests/test_envs.py`` scans the source), so a reader finds every switch here and ``docs/environment.md`` is
rendered from this table (the same test keeps it current). Values are read when asked for, never cached: a harness
sets them per process, and vLLM's workers inherit the engine's.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Mapping

from portable_spec.errors import PortableSpecError


# The names, for messages and for harnesses that set them.
PLATFORM_ENV = "VLLM_PLATFORM"
DRAFT_GRAPH_ENV = "PORTABLE_SPEC_DRAFT_GRAPH"
DRAFT_CHAIN_ENV = "PORTABLE_SPEC_DRAFT_CHAIN"
WARMUP_ENV = "PORTABLE_SPEC_WARMUP"
TORCHADA_CAP_ENV = "TORCHADA_GRAPH_EXEC_CAP"
TORCHADA_AUTOPROBE_ENV = "TORCHADA_GRAPH_AUTOPROBE"
TORCHADA_ROTATION_ENV = "TORCHADA_GRAPH_ROTATION"
SIM_DEVICE_ENV = "PORTABLE_SPEC_SIM_DEVICE"
SIM_TORCHADA_GRAPHS_ENV = "PORTABLE_SPEC_SIM_TORCHADA_GRAPHS"
SIM_VLLM_MUSA_OPS_ENV = "PORTABLE_SPEC_SIM_VLLM_MUSA_OPS"
FAIL_CAPTURE_ENV = "PORTABLE_SPEC_FAIL_CAPTURE"
INJECT_BUG_ENV = "PORTABLE_SPEC_INJECT_BUG"
TRITON32_PYTHON_ENV = "PORTABLE_SPEC_TRITON32_PYTHON"
HIP_LLD_ENV = "TRITON_HIP_LLD_PATH"
VERIFY_JIT_BUDGET_ENV = "PORTABLE_SPEC_VERIFY_JIT_BUDGET_S"
CUDA_HOME_ENV = "CUDA_HOME"
STACK_EVERY_ENV = "PORTABLE_SPEC_STACK_EVERY_S"
STACK_DIR_ENV = "PORTABLE_SPEC_STACK_DIR"
VLLM_PLUGINS_ENV = "VLLM_PLUGINS"
VLLM_MUSA_DRAFT_WRAP_ENV = "VLLM_MUSA_DRAFT_FULL_WRAP"
VLLM_MUSA_DFLASH_WRAP_ENV = "VLLM_MUSA_DFLASH_FULL_WRAP"
VLLM_MUSA_EAGLE_RUNNER_ENV = "VLLM_MUSA_EAGLE_RUNNER"
VLLM_BATCH_INVARIANT_ENV = "VLLM_BATCH_INVARIANT"
FLASHINFER_WORKSPACE_ENV = "FLASHINFER_WORKSPACE_BASE"
TRITON_CACHE_ENV = "TRITON_CACHE_DIR"
TRITON_KEY_LOG_ENV = "PORTABLE_SPEC_LOG_TRITON_KEYS"


@dataclass(frozen=True)
class EnvVar:
    name: str
    default: str
    """The value an unset (or blank) variable has; "" means unset has its own meaning, given in ``meaning``."""
    meaning: str
    choices: tuple[str, ...] = ()
    """The values accepted (lower-cased); empty: free-form."""
    who: str = "serve"
    """Who reads it: ``serve`` (what ``vllm serve`` loads), ``cli`` (a CLI command or lane), ``test`` (fault
    injection and lanes)."""


VARIABLES: tuple[EnvVar, ...] = (
    EnvVar(PLATFORM_ENV, "",
           "Which platform to use: our port for the CLI, our vLLM platform class for `vllm serve` (through the "
           "`vllm.platform_plugins` entry point). Unset: the CLI detects the device and vLLM keeps its built-in "
           "platforms. Case-insensitive. Set but empty is an error (one line): unset it instead.",
           choices=("cuda", "rocm", "musa", "cpu")),
    EnvVar(DRAFT_GRAPH_ENV, "",
           "Our FULL drafter graphs: `full`, `piecewise` or `none` (the last two leave vLLM's drafter alone). Unset: "
           "`full` under our platform; off on vLLM's built-in platforms, where `full` turns our general plugin on "
           "but our drafter still needs our platform's capture plan (`VLLM_PLATFORM=cuda`): without one, one line "
           "says so and vLLM's drafter runs. Under Model Runner V2 (vLLM 0.33) it also covers the standalone draft "
           "model (`method: draft_model`): unset or `full` records its step 0 and decode steps as FULL graphs (our speculator "
           "class, `worker/mrv2_speculator.py`); `none` or `piecewise` keeps vLLM's eager speculator.",
           choices=("full", "piecewise", "none")),
    EnvVar(DRAFT_CHAIN_ENV, "fused",
           "EAGLE chain steps: `fused` (forward + greedy sample + next inputs in one graph, where exact) or "
           "`forward` (the forward alone in the graph, sampling eager).", choices=("fused", "forward")),
    EnvVar(WARMUP_ENV, "on",
           "The boot-time kernel warm-ups: the V1 runner's (an MoE target's eager token counts, its steps, then "
           "structured output's bitmask kernel), and "
           "under Model Runner V2 (our platforms, vLLM 0.26.x, 0.28.x and 0.33.x) the sampled rounds after MRV2's own "
           "warm-up; `off` (or 0/false/no) skips them, any other value keeps them on. A failed MRV2 sampled round is "
           "named in one line, its requests are finished and the engine boots on with one warning; a failed "
           "structured-output or MoE size warm-up is one warning."),
    EnvVar(TORCHADA_CAP_ENV, "1900",
           "torchada's cap on live MUSA graph executables (read, not set): the live-graph budget the planner and the "
           "drafter prune to on MUSA. A positive integer, as torchada reads it; torchada ignores any other value and "
           "caps at 1900, so the CLI refuses one in one line and an engine plans with 1900 and logs that line. "
           "The default is the installed torchada's `_DEFAULT_CAP` (`torchada/_graph_rotation.py`, read without "
           "importing torchada), 1900 where torchada is absent."),
    EnvVar(TORCHADA_AUTOPROBE_ENV, "0",
           "torchada's switch (read, not set): exactly `1`, with `TORCHADA_GRAPH_EXEC_CAP` not in the environment, "
           "has torchada measure the driver's live-executable limit at startup and cap at that limit minus "
           "`TORCHADA_GRAPH_EXEC_MARGIN` (128), at least 64. That number exists only once torchada has run on the "
           "device, so we plan with the default cap and say so (`probe`, and one line from an engine): set "
           "`TORCHADA_GRAPH_EXEC_CAP` to plan with a measured cap."),
    EnvVar(TORCHADA_ROTATION_ENV, "1",
           "torchada's switch (read, not set): `0` turns its graph rotation off, so torchada enforces no cap and "
           "the MUSA driver's own limit (~2043 live executables, per torchada) fails a capture past it; we still "
           "plan under the cap, and `probe` says rotation is off."),
    EnvVar(VLLM_PLUGINS_ENV, "",
           "vLLM's plugin filter (read, not set): the entry-point names vLLM loads, comma-separated, in every plugin "
           "group. With vllm-musa installed, `VLLM_PLATFORM=musa` puts our layer on vllm-musa only with "
           "`VLLM_PLUGINS=portable_spec,musa_custom_ops` (vllm-musa's platform plugin `musa` left out, its general "
           "plugin kept); unset or naming `musa`, our probe steps aside and vllm-musa serves alone (one warning "
           "says so). Without `musa_custom_ops` the probe fails in one line naming the value."),
    EnvVar(VLLM_MUSA_DRAFT_WRAP_ENV, "0",
           "vllm-musa's switch (read, not set; its default on MUSA is `0`): `1` has vllm-musa wrap the EAGLE/EAGLE-3/"
           "MTP draft model in FULL graphs itself, and our drafter then steps aside for those methods (one line says "
           "so). Only read on vllm-musa."),
    EnvVar(VLLM_MUSA_DFLASH_WRAP_ENV, "1",
           "vllm-musa's switch (read, not set; its default is on): anything but `0` has vllm-musa capture the "
           "DFlash drafter in FULL graphs itself, and our DFlash drafter then steps aside (one line says so); `0` "
           "leaves DFlash's drafter graphs to us. Only read on vllm-musa."),
    EnvVar(VLLM_MUSA_EAGLE_RUNNER_ENV, "0",
           "vllm-musa's switch (read, not set; its default is `0`, the runner off): `1` has vllm-musa's wrapper of "
           "vLLM's `EagleProposer.propose` replay its EagleFullLoopRunner on MUSA (the whole EAGLE draft chain as one "
           "graph per batch size), and our drafter then steps aside for EAGLE, EAGLE-3 and MTP (one line says so). "
           "Only read on vllm-musa."),
    EnvVar(SIM_DEVICE_ENV, "",
           "Harness only: the device a simulation stands in for (`musa` with `VLLM_PLATFORM=musa`: the musa-sim "
           "engine lane); our platform probe then steps aside for the simulation's own plugin.", choices=("musa",),
           who="test"),
    EnvVar(SIM_TORCHADA_GRAPHS_ENV, "off",
           "Harness only (musa-sim): `on` simulates torchada's graph aliasing in every musa-sim process: "
           "`torch.cuda.CUDAGraph` and `torch.cuda.graph` become the simulated `torch.musa`'s MUSAGraph and graph, "
           "so the graphs vLLM records through `torch.cuda` itself (Model Runner V2's target and speculator graphs, "
           "vLLM's piecewise graphs) keep the MUSA rules and count against the simulated live-graph cap, as on "
           "MUSA. The musa-sim Model Runner V2 variants set it; the V1 ones leave it off.", choices=("on", "off"),
           who="test"),
    EnvVar(SIM_VLLM_MUSA_OPS_ENV, "off",
           "Harness only (musa-sim): `on` makes the simulated MUSA platform answer `is_cuda_alike()` True, as "
           "vllm-musa's platform does with its compiled MUSA ops, so vLLM uses its compiled ops there (Model Runner "
           "V2 needs one for its UVA buffers, `get_accelerator_view_from_cpu_tensor`). Without vllm-musa no MUSA "
           "host has those ops, so our standalone MUSA class answers False. The musa-sim Model Runner V2 variants "
           "set it; the V1 ones leave it off.", choices=("on", "off"), who="test"),
    EnvVar(FAIL_CAPTURE_ENV, "",
           "Fault injection: `RANK:KIND:REQS[,...]` (RANK may be `*`) makes the drafter's capture of that key raise "
           "on that rank, as an uncapturable operation would. Never set in production.", who="test"),
    EnvVar(INJECT_BUG_ENV, "",
           "Harness only (the e2e driver's `--inject-bug`, our variant's child at TP=1): the child installs one "
           "known drafter bug through `harness/portable_spec_harness/vllm_door/bug_injection.py` to show the exactness checks "
           "catch it: `position_off_by_one` (chain draft positions one too far), `wrong_slot` (the last request's "
           "first-pass KV slots are padding), `stale_seq_lens` (chain steps read the previous step's `seq_lens`), "
           "`wrong_num_computed` (one request's valid-token count handed to the runner one too high), "
           "`draft_position_off_by_one` (the draft model's chain steps one position ahead), `d2t_unmapped` "
           "(the fused graphs skip an EAGLE-3 draft vocabulary's d2t map: draft ids, not target ids). Unset: "
           "nothing is installed. Never set in production.",
           choices=("position_off_by_one", "wrong_slot", "stale_seq_lens", "wrong_num_computed",
                    "draft_position_off_by_one", "d2t_unmapped"),
           who="test"),
    EnvVar(TRITON32_PYTHON_ENV, "",
           "The interpreter of a virtualenv with triton==3.2.0 for `portable-spec kernels --check-triton` (the "
           "`--triton32-python` flag wins); `ci/lanes/triton32_venv.sh` builds one.", who="cli"),
    EnvVar(HIP_LLD_ENV, "",
           "Triton's own variable (read, and handed to Triton): the `ld.lld` Triton 3.2's AMD backend links with, "
           "for the AMD compile of `portable-spec kernels --check-triton`. Unset: `ld.lld` on `PATH`, else the "
           "newest `/usr/lib/llvm-*/bin/ld.lld` (Debian: `apt-get install lld`); none found is a one-line error.",
           who="cli"),
    EnvVar(VERIFY_JIT_BUDGET_ENV, "150",
           "Seconds `probe --verify` may spend compiling attention kernels before it skips the rest.", who="cli"),
    EnvVar(CUDA_HOME_ENV, "",
           "Read, not set: `probe --verify` skips JIT-compiled backends when neither nvcc nor CUDA_HOME is there.",
           who="cli"),
    EnvVar(VLLM_BATCH_INVARIANT_ENV, "",
           "vLLM's switch (read, not acted on): `probe --verify` copies it into its report, because vLLM's attention "
           "kernels read it at import and `1` changes which kernel runs (the 3D split-softmax decode kernel is off).",
           who="cli"),
    EnvVar(FLASHINFER_WORKSPACE_ENV, "/tmp/portable_spec_flashinfer",
           "FlashInfer's JIT workspace (read, not acted on): `probe --verify` sets this default when it is unset, so "
           "its compiled kernels are reused across runs, and copies the value into its report.", who="cli"),
    EnvVar(TRITON_CACHE_ENV, "",
           "Triton's own variable (read, and set): where Triton keeps compiled kernels. Our V1 runner (under Model "
           "Runner V2, our worker) reads it before the model compiles, and from the boot warm-ups on the engine's "
           "process keeps that value: unset, Triton's default folder (`~/.triton/cache`), named explicitly, instead "
           "of the compiled model's inductor folder, which inductor sets while compiling. So a restart that loads "
           "the compiled model finds the warm-ups' kernels on disk, and a kernel first launched while serving finds "
           "the launcher the warm-ups built instead of running the C compiler (`worker/triton_cache.py`). A value "
           "you set is used as given."),
    EnvVar(TRITON_KEY_LOG_ENV, "off",
           "`on`: our boot warm-ups log one more line, every Triton kernel they built with the parts of its "
           "disk-cache key (the key, the source hash with its specialisation, the options, the `ptxas` version the "
           "key holds), so two boots' lines tell which part kept a restart from finding a kernel on disk "
           "(`worker/triton_builds.py`). Off: the warm-up's usual line only.", choices=("on", "off")),
    EnvVar(STACK_EVERY_ENV, "0",
           "Harness (boot-time driver): sample every process's stacks every N seconds while an engine boots "
           "(0: off).", who="test"),
    EnvVar(STACK_DIR_ENV, "",
           "Harness (boot-time driver): where the stack samples go.", who="test"),
)
BY_NAME: dict[str, EnvVar] = {var.name: var for var in VARIABLES}


def raw(name: str, environ: Mapping[str, str] | None = None) -> str:
    """The variable's stripped value, or its default when unset or blank. Only names in ``VARIABLES``."""
    var = BY_NAME[name]
    value = (os.environ if environ is None else environ).get(name, "").strip()
    return value or var.default


def choice(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The lower-cased value of a variable with ``choices`` (None: unset with no default); a value outside the
    choices raises one line naming them."""
    var = BY_NAME[name]
    value = raw(name, environ).lower()
    if not value:
        return None
    if var.choices and value not in var.choices:
        raise PortableSpecError(f"{name}={value!r} is not one of {', '.join(var.choices)}; unset it or pick one of "
                                "those")
    return value


def is_set(name: str, environ: Mapping[str, str] | None = None) -> bool:
    return bool((os.environ if environ is None else environ).get(name, "").strip())


# -- named readers, for the call sites ---------------------------------------------------------------------------
def requested_platform(environ: Mapping[str, str] | None = None) -> str | None:
    """The lower-cased, stripped ``VLLM_PLATFORM``, or None when unset; ``""`` when set but blank, which the
    platform registry refuses in one line (as vLLM's own ``env_with_choices`` validates a set-but-empty value instead
    of reading it as unset). Not validated here otherwise: the registry names the valid choices (a platform may be
    added without touching this module)."""
    env = os.environ if environ is None else environ
    return None if PLATFORM_ENV not in env else env[PLATFORM_ENV].strip().lower()


def simulated_device() -> str | None:
    """The lower-cased ``PORTABLE_SPEC_SIM_DEVICE`` (the device a harness simulation stands in for), or None."""
    return raw(SIM_DEVICE_ENV).lower() or None


def sim_torchada_graphs() -> bool:
    """Whether a musa-sim process simulates torchada's aliasing of ``torch.cuda``'s graph API
    (``PORTABLE_SPEC_SIM_TORCHADA_GRAPHS=on``)."""
    return raw(SIM_TORCHADA_GRAPHS_ENV).lower() == "on"


def sim_vllm_musa_ops() -> bool:
    """Whether musa-sim stands in for vllm-musa's compiled ops (``PORTABLE_SPEC_SIM_VLLM_MUSA_OPS=on``)."""
    return raw(SIM_VLLM_MUSA_OPS_ENV).lower() == "on"


def draft_graph() -> str | None:
    """``PORTABLE_SPEC_DRAFT_GRAPH``: None when unset (its meaning depends on the platform), else a valid mode."""
    return choice(DRAFT_GRAPH_ENV)


def draft_chain() -> str:
    return choice(DRAFT_CHAIN_ENV) or "fused"


def warmup_enabled() -> bool:
    return raw(WARMUP_ENV).lower() not in ("off", "0", "false", "no")


TORCHADA_DEFAULT_EXEC_CAP = int(BY_NAME[TORCHADA_CAP_ENV].default)


def torchada_graph_exec_cap(environ: Mapping[str, str] | None = None, default: int = TORCHADA_DEFAULT_EXEC_CAP) -> int:
    """torchada's live-graph cap, read as torchada reads it (``torchada/_graph_rotation.py`` 0.1.103: ``_read_cap``,
    lines 48-55, called by ``_resolve_cap`` whenever the variable is set): unset means ``default`` (torchada's
    ``_DEFAULT_CAP``, 1900; the MUSA port passes the installed torchada's), a set value is ``int()``-parsed and must
    be positive. torchada ignores anything else (a non-integer with a warning, 0 or a negative silently) and caps at
    its default; a planner that did the same would hide the typo, so such a value raises one line naming the fix and
    the cap torchada uses instead. Blank counts as unset (torchada: not an integer, so its default too)."""
    value = (os.environ if environ is None else environ).get(TORCHADA_CAP_ENV, "").strip()
    if not value:
        return default
    try:
        cap = int(value)
    except ValueError:
        cap = 0
    if cap <= 0:
        raise PortableSpecError(f"{TORCHADA_CAP_ENV}={value!r} is not a positive integer (torchada ignores it and caps "
                                f"live graph executables at {default}): set a positive count, or unset it for the "
                                "default")
    return cap


def torchada_autoprobe(environ: Mapping[str, str] | None = None) -> bool:
    """Whether torchada measures its own cap at startup: ``TORCHADA_GRAPH_AUTOPROBE`` is exactly ``1`` and
    ``TORCHADA_GRAPH_EXEC_CAP`` is not in the environment at all (``_resolve_cap``, ``torchada/_graph_rotation.py``
    lines 113-135, 0.1.103: a set cap, even a blank one, wins; neither value is stripped)."""
    env = os.environ if environ is None else environ
    probe = env.get(TORCHADA_AUTOPROBE_ENV, BY_NAME[TORCHADA_AUTOPROBE_ENV].default)
    return TORCHADA_CAP_ENV not in env and probe == "1"


def torchada_rotation(environ: Mapping[str, str] | None = None) -> bool:
    """Whether torchada rotates live graph executables (``is_enabled``: ``TORCHADA_GRAPH_ROTATION`` is not ``0``)."""
    env = os.environ if environ is None else environ
    return env.get(TORCHADA_ROTATION_ENV, BY_NAME[TORCHADA_ROTATION_ENV].default) != "0"


def fail_capture() -> str:
    return raw(FAIL_CAPTURE_ENV)


def inject_bug() -> str | None:
    """``PORTABLE_SPEC_INJECT_BUG``: the drafter bug the harness injects, or None (a bad value raises one line)."""
    return choice(INJECT_BUG_ENV)


def triton32_python() -> str:
    return raw(TRITON32_PYTHON_ENV)


def hip_lld_path() -> str:
    return raw(HIP_LLD_ENV)


def verify_jit_budget_s(environ: Mapping[str, str] | None = None) -> float:
    """Seconds ``probe --verify`` may spend compiling; a value that is not a finite number >= 0 raises one line."""
    value = raw(VERIFY_JIT_BUDGET_ENV, environ)
    try:
        seconds = float(value)
    except ValueError:
        seconds = float("nan")
    if not math.isfinite(seconds) or seconds < 0:
        raise PortableSpecError(f"{VERIFY_JIT_BUDGET_ENV}={value!r} is not a number of seconds >= 0: set it to e.g. "
                                f"{BY_NAME[VERIFY_JIT_BUDGET_ENV].default} (the default) or unset it")
    return seconds


def cuda_home() -> str | None:
    return raw(CUDA_HOME_ENV) or None


def vllm_plugins(environ: Mapping[str, str] | None = None) -> list[str] | None:
    """``VLLM_PLUGINS`` as vLLM reads it (``vllm/envs.py``): None when unset, else the value split at commas, not
    stripped (vLLM compares entry-point names with these items as they are; an empty value filters out every
    plugin)."""
    env = os.environ if environ is None else environ
    return None if VLLM_PLUGINS_ENV not in env else env[VLLM_PLUGINS_ENV].split(",")


def vllm_musa_draft_full_wrap() -> bool:
    """Whether vllm-musa wraps the EAGLE-family draft model in FULL graphs itself (it compares with "1")."""
    return raw(VLLM_MUSA_DRAFT_WRAP_ENV) == "1"


def vllm_musa_eagle_runner() -> bool:
    """Whether vllm-musa's wrapper of ``EagleProposer.propose`` replays its EagleFullLoopRunner (it compares with
    "1")."""
    return raw(VLLM_MUSA_EAGLE_RUNNER_ENV) == "1"


def vllm_musa_dflash_full_wrap() -> bool:
    """Whether vllm-musa captures the DFlash drafter in FULL graphs itself (anything but "0")."""
    return raw(VLLM_MUSA_DFLASH_WRAP_ENV) != "0"


def stack_sampling() -> tuple[float, str | None]:
    """``(every_s, directory)`` for the boot-time driver's stack samples (0: off)."""
    return float(raw(STACK_EVERY_ENV) or 0), raw(STACK_DIR_ENV) or None


def triton_cache_dir() -> str | None:
    """``TRITON_CACHE_DIR`` as the process has it now, as Triton reads it (None: unset, Triton's default folder)."""
    return os.environ.get(TRITON_CACHE_ENV)


def set_triton_cache_dir(value: str | None) -> None:
    """Sets ``TRITON_CACHE_DIR`` (None: unsets it, leaving Triton its default folder)."""
    if value is None:
        os.environ.pop(TRITON_CACHE_ENV, None)
    else:
        os.environ[TRITON_CACHE_ENV] = value


def log_triton_keys() -> bool:
    """Whether the warm-ups log each Triton build's key parts (``PORTABLE_SPEC_LOG_TRITON_KEYS=on``)."""
    return choice(TRITON_KEY_LOG_ENV) == "on"


def recorded(names: tuple[str, ...]) -> dict[str, str | None]:
    """Other projects' variables copied into a report as they are (None: unset), never acted on."""
    return {name: os.environ.get(name) for name in names}


def render_markdown() -> str:
    """The table ``docs/environment.md`` holds (kept equal by ``tests/test_envs.py``)."""
    rows = ["| variable | default | read by | meaning |", "|---|---|---|---|"]
    for var in VARIABLES:
        default = f"`{var.default}`" if var.default else "unset"
        rows.append(f"| `{var.name}` | {default} | {var.who} | {var.meaning} |")
    return "\n".join(rows) + "\n"
