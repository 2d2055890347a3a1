"""Every environment variable the lanes, the harness's scripts and the tests read that the product does not.

The product's switches live in ``portable_spec/envs.py`` (what ``vllm serve`` and the CLI read); these are the knobs
of ``ci/`` and ``.ci/`` (stages, parts, rounds, where virtualenvs and results go) and what the lanes hand the tests.
They are kept apart so the product's table stays the product's, and here in one table so a developer finds every knob
in ``docs/environment.md``'s second section, which is this module's ``render_markdown()``.
``tests/test_environment_doc.py`` scans every script and module for reads: a read of a name in neither table fails,
and so does a row whose "read by" is not the set of files that read it.
"""

from __future__ import annotations

from dataclasses import dataclass

CUDA = "ci/lanes/cuda.sh"
TP2 = "ci/gpu/tp2.sh"
SOAK = "ci/gpu/soak.sh"
SERVE_BENCH = "ci/gpu/serve_bench.sh"
MRV2_BENCH = "ci/gpu/mrv2_bench.sh"


@dataclass(frozen=True)
class LaneVar:
    name: str
    default: str
    """The value when unset, as the reader spells it (rendered as code unless it is prose with spaces); "": unset
    has its own meaning, given in ``meaning``."""
    read_by: tuple[str, ...]
    """The repository files that read it (sorted; the scan in ``tests/test_environment_doc.py`` must find the same)."""
    meaning: str


def _knob(name: str, default: str, meaning: str, *read_by: str) -> LaneVar:
    return LaneVar(name, default, tuple(sorted(read_by or (CUDA,))), meaning)


VARIABLES: tuple[LaneVar, ...] = (
    # -- the cpu lane and its virtualenvs
    _knob("PORTABLE_SPEC_LANE_OUT", "",
          "Where the cpu lane keeps each vLLM version's JUnit XML, version-gate JSON and install log, and "
          "`versions.json`. Unset: a temporary folder, removed when the lane ends.", "ci/lanes/cpu.sh"),
    _knob("PORTABLE_SPEC_VENV_ROOT", "~/.cache/portable_spec/venvs",
          "Where the cpu lane's virtualenvs live: one per vLLM version of the span, keyed by its requirements file's "
          "hash, and the Triton 3.2 one.", "ci/lanes/cpu_venv.sh", "ci/lanes/triton32_venv.sh"),
    _knob("PORTABLE_SPEC_VENV", "",
          "A fixed folder for the main (vLLM 0.26.0) cpu-lane virtualenv instead of its keyed one under "
          "`PORTABLE_SPEC_VENV_ROOT`; the span's other versions always get keyed folders.", "ci/lanes/cpu_venv.sh"),
    _knob("TORCH_INDEX_URL", "",
          "pip's `--index-url` for the CPU torch wheel when the machine has none on disk (e.g. "
          "`https://download.pytorch.org/whl/cpu`). Unset: pip's configured index.", "ci/lanes/cpu_venv.sh"),
    _knob("PYTHON", "python3",
          "The interpreter a lane runs (cuda, musa, rocm and the GPU scripts), or builds a cpu-lane virtualenv from.",
          "ci/lanes/cpu_venv.sh", CUDA, "ci/lanes/device_lane.sh", TP2, MRV2_BENCH, SOAK, SERVE_BENCH),
    # -- what the lanes hand the tests
    _knob("PORTABLE_SPEC_LANE", "",
          "Set by the cpu lane (`cpu`): a test whose tool is missing (the Triton interpreter, the Triton 3.2 Python) "
          "fails instead of skipping, as it does on a developer's machine (`tests/lane_tools.py`).",
          "tests/lane_tools.py"),
    _knob("PORTABLE_SPEC_CPU_INSTALL_MIRRORS", "",
          "`required` (the cpu lane's default): `tests/test_cpu_install.py` fails where this machine image's CPU "
          "wheel and PyPI mirrors (`/opt/wheels`, `/opt/pypi*`) are missing; anything else, or unset, skips it there "
          "(GitHub's runner sets `optional`).", "ci/lanes/cpu.sh", "tests/test_cpu_install.py"),
    _knob("PORTABLE_SPEC_TRITON32_REPORT", "",
          "The Triton 3.2 check's JSON report, written by the cpu or musa lane just before pytest: "
          "`tests/test_triton_check.py` reads it instead of running the check again. Unset: the test runs it.",
          "tests/test_triton_check.py"),
    _knob("TRITON_INTERPRET", "",
          "Triton's switch (read, not acted on by us): `1` runs Triton kernels on the CPU. The cpu lane sets it; a "
          "test that runs a kernel needs it (`tests/lane_tools.py`), and the MRV2 substitute children replace "
          "`log1p`, which the interpreter lacks.", "tests/lane_tools.py", "tests/mrv2_substitute_children.py"),
    _knob("PORTABLE_SPEC_TEST_VLLM_PLATFORM", "cpu-graph-test",
          "`native` (the cuda, musa and rocm lanes): the tests use the platform vLLM detects; otherwise "
          "`tests/conftest.py` pins vLLM's current platform to the harness's CPU graph test platform.",
          "tests/conftest.py"),
    _knob("PORTABLE_SPEC_GPU_OUT", "",
          "Folder the GPU kernel tests write their timing JSON into (the cuda lane's tests stage sets it). Unset: "
          "nothing written.", "tests/gpu/kernel_timing.py"),
    _knob("PORTABLE_SPEC_PARITY_N", "1000",
          "Draft-parity cases of the GPU tests (the musa-sim runner's test runs a fifth); lower it for a quick run.",
          "tests/gpu/test_draft_parity.py", "tests/gpu/test_musa_sim_runner.py"),
    # -- the cuda lane (ci/lanes/cuda.sh's header has each stage)
    _knob("VLLM_SITE", "/tmp/site",
          "The folder holding the staged vLLM, put first on `PYTHONPATH` (`/tmp/site-<version>` for another vLLM of "
          "the span); named but missing is an error. `ci/gpu/lane_and_pack.sh` places a carried FlashInfer cache's "
          "modules in it as ahead-of-time builds.", CUDA, "ci/gpu/lane_and_pack.sh"),
    _knob("E2E_PARTS", "",
          "The e2e stage's parts of `ci/gpu/v1_drafter_matrix.py`, comma-separated (`mrv2`: the Model Runner V2 "
          "parts; `bugs`: the injected-bug parts). Unset: every V1 part."),
    _knob("E2E_PARALLEL", "`3` (`ci/gpu/tp2.sh`: `6`)",
          "Matrix parts run side by side on the GPU (correctness only, never timing).", CUDA, TP2),
    _knob("E2E_CONCURRENT", "", "Non-empty: each e2e part also boots its variants at once."),
    _knob("MUSA_SIM_PARTS", "", "The musa-sim-e2e stage's parts, comma-separated. Unset: every part."),
    _knob("MUSA_SIM_PARALLEL", "4", "musa-sim parts run side by side."),
    _knob("MUSA_SIM_CONCURRENT", "", "Non-empty: each musa-sim part also boots its variants at once."),
    _knob("MUSA_SIM_E2E", "0",
          "`1` (with vLLM in `PYTHON` and a CUDA GPU): the musa lane also runs the musa-sim engine lane.",
          "ci/lanes/musa.sh"),
    _knob("BENCH_PAIR", "llama_eagle", "The bench stage's zoo pair."),
    _knob("BENCH_MODEL_VARIANT", "attention", "The pair's model variant: `attention`, `perfect` or `partial`."),
    _knob("BENCH_VARIANTS", "nospec,upstream_v1,full_drafter_unfused,full_drafter,mrv2",
          "The engines the bench boots and times in turns."),
    _knob("BENCH_K", "3", "Speculative tokens per step."),
    _knob("BENCH_CONCURRENCY", "1,4,16,64", "Concurrencies the bench times."),
    _knob("BENCH_REPEATS", "5", "Timed passes per cell."),
    _knob("BENCH_BOOT_TIMEOUT", "420", "Seconds an engine may take to boot (bench and tp2's bench).", CUDA, TP2),
    _knob("BENCH_PROFILE_CONCURRENCY", "1", "The concurrency the bench profiles after its passes."),
    _knob("BOOT_VARIANTS", "full_drafter,upstream_v1", "The boottime stage's engines, booted one at a time."),
    _knob("BOOT_WARM", "", "Non-empty: the boot-time driver also boots each engine again on warm caches.", CUDA, TP2),
    _knob("SPAN_PARTS", "perfect",
          "The e2e parts `ci/gpu/version_span.py` runs on another vLLM of the span (where our V1 drafter exists)."),
    _knob("SOAK_PAIRS", "llama_ctx_eagle,llama_ctx_eagle3,mixtral_eagle",
          "The soak's pairs (`ci/gpu/tp2.sh`'s soak step: `llama_ctx_eagle3`).", SOAK, TP2),
    _knob("SOAK_SYNC_PAIRS", "llama_ctx_eagle",
          "Pairs whose drafters also serve without async scheduling; set but empty: none (`ci/gpu/tp2.sh`'s soak "
          "step: none unless set).", SOAK, TP2),
    _knob("SOAK_REQUESTS", "96", "Requests per server.", SOAK),
    _knob("SOAK_TP", "`1` (`ci/gpu/tp2.sh`: `2`)",
          "Tensor parallel of every soak server (all on GPUs 0..N-1); 2 or more adds `--disable-custom-all-reduce "
          "--no-fuse-allreduce-rms` (`ci/gpu/tp_flags.sh`).", SOAK, TP2),
    _knob("SERVE_BENCH_PAIR", "llama_eagle",
          "A prepared pair folder, a zoo pair or a real-shapes name for the serving benchmark.", SERVE_BENCH),
    _knob("SERVE_BENCH_MODE", "attention", "The zoo variant or the weights label (`dummy`, `designed`).", SERVE_BENCH),
    _knob("SERVE_BENCH_HEAD", "perfect", "A designed real_shapes pair's draft: `perfect` or `partial`.", SERVE_BENCH),
    _knob("SERVE_BENCH_VARIANTS", "upstream_v1,ours,mrv2",
          "The servers compared; a name ending in `@async` or `@sync` is one more server of that variant with async "
          "scheduling on or off (`upstream_v1,ours,ours@async`), with its own ratios (`ours@async_over_ours`).",
          SERVE_BENCH),
    _knob("SERVE_BENCH_CONCURRENCY", "1,2,8,32", "`--max-concurrency` of each client run.", SERVE_BENCH),
    _knob("SERVE_BENCH_ROUNDS", "3",
          "Rounds; every round visits every (input length, sampling, concurrency) cell with every variant.",
          SERVE_BENCH),
    _knob("SERVE_BENCH_FIRST_ROUND", "0",
          "Rotation offset of the first round, when one benchmark is split over calls (pool them with "
          "`python -m portable_spec_harness.serve_bench.combine`).", SERVE_BENCH),
    _knob("SERVE_BENCH_SIZING_FROM", "",
          "An earlier call's `serve_bench.json` (or its folder) of the same benchmark, carried in the tree: the cells "
          "it sized keep its prompts and run one warm pass instead of two (`--sizing-from`); another pair, weights, "
          "output length or sizing setting is refused in one line.", SERVE_BENCH),
    _knob("SERVE_BENCH_SIZE_PER_VARIANT", "",
          "Non-empty: size each variant's timed runs in a cell from its own warm run (`--size-per-variant`), so a "
          "slow baseline's runs last about as long as the others' instead of running the fastest variant's prompts "
          "for several times as long; unset: one size per cell for every variant. `SERVE_BENCH_SIZING_FROM` must "
          "name a call sized the same way.", SERVE_BENCH),
    _knob("SERVE_BENCH_KEEP_SERVERS", "",
          "A registry file (e.g. `/tmp/serve_bench_kept.json`): leave this call's servers running for the next call "
          "of the same benchmark on a host that stays up (`--keep-servers`; needs `SERVE_BENCH_NO_PHASE_CLOCK`; "
          "with `SERVE_BENCH_PLACEMENT=in_turn`, the last round's last server, which the next call's first round "
          "starts with).",
          SERVE_BENCH),
    _knob("SERVE_BENCH_REUSE_SERVERS", "",
          "An earlier call's `SERVE_BENCH_KEEP_SERVERS` registry: its servers that are the same servers (arguments "
          "but the port, environment, code), alive and healthy, stand in for this call's boots; the rest boot, each "
          "with its reason in the report (`--reuse-servers`).", SERVE_BENCH),
    _knob("SERVE_BENCH_SERVER_MAX_NUM_SEQS", "the highest of `SERVE_BENCH_CONCURRENCY`",
          "The servers' `--max-num-seqs` (`--server-max-num-seqs`): a chained call of fewer concurrencies names the "
          "chain's highest, so its `vllm serve` arguments match the kept servers' and it reuses them; below the "
          "call's highest concurrency is refused in one line.", SERVE_BENCH),
    _knob("SERVE_BENCH_SERVER_MAX_INPUT_LEN", "the longest of `SERVE_BENCH_INPUT_LEN`",
          "The input length the servers' `--max-model-len` and KV cache fit (`--server-max-input-len`), for the same "
          "reason; below the call's longest input is refused in one line.", SERVE_BENCH),
    _knob("SERVE_BENCH_KV_CACHE_GIB", "sized from the servers' shape",
          "Each server's KV cache in GiB per GPU (`--kv-cache-gib`), where the default (every request at its full "
          "length, 1.25 times over) would keep two servers of a large pair from sharing one GPU; the placement "
          "decision and the report use it.", SERVE_BENCH),
    _knob("SERVE_BENCH_NO_PHASE_CLOCK", "", "Non-empty: skip the phase clock and its profiled pass.", SERVE_BENCH),
    _knob("SERVE_BENCH_CLOCK_CELL", "c = 1 at the first input length and sampling",
          "The cell the phase clock runs in (`--clock-cell`), one of the call's, e.g. `in4096/sampled/c8`: where a "
          "cell that misses a target gets its cause; not one of the call's, or with `SERVE_BENCH_NO_PHASE_CLOCK`, "
          "is refused in one line.", SERVE_BENCH),
    _knob("SERVE_BENCH_ASYNC_SCHEDULING", "default",
          "`default` (vLLM's choice for the method), `on` or `off`: `--async-scheduling` or "
          "`--no-async-scheduling` on every variant's server without an `@async` / `@sync` suffix.", SERVE_BENCH),
    _knob("SERVE_BENCH_INPUT_LEN", "256",
          "Prompt tokens per request, comma-separated: one cell per length; the servers fit the longest.", SERVE_BENCH),
    _knob("SERVE_BENCH_OUTPUT_LEN", "256", "Output tokens per request.", SERVE_BENCH),
    _knob("SERVE_BENCH_SAMPLING", "greedy",
          "`greedy`, `sampled` (temperature 0.8, top-p 0.95, each request seeded) or both, comma-separated: one cell "
          "per mode.", SERVE_BENCH),
    _knob("SERVE_BENCH_PROMPTS_PER_SLOT", "2",
          "The fewest prompts per concurrency slot in a timed client run (`SERVE_BENCH_MIN_RUN_S` may size more).",
          SERVE_BENCH),
    _knob("SERVE_BENCH_MIN_RUN_S", "10",
          "Seconds each timed client run should last: every cell's prompts are sized from its warm run, and a "
          "shorter run is flagged in the report; `0`: `SERVE_BENCH_PROMPTS_PER_SLOT` as given.", SERVE_BENCH),
    _knob("SERVE_BENCH_PLACEMENT", "auto",
          "`together`, `in_turn` or `auto` (together when the memory estimate, per GPU, fits).", SERVE_BENCH),
    _knob("SERVE_BENCH_TP", "`1` (`ci/gpu/tp2.sh`: `2`)",
          "Tensor parallel of every benchmark server (placement estimated per GPU, the TP in the report); 2 or more "
          "adds `--disable-custom-all-reduce --no-fuse-allreduce-rms` (`ci/gpu/tp_flags.sh`).", SERVE_BENCH, TP2),
    _knob("SERVE_BENCH_BUDGET", "480", "Seconds after which no new round starts (the stage stays under 9 minutes).",
          SERVE_BENCH),
    _knob("SWEEP_VARIANTS", "ours,upstream_v1",
          "The sampling sweep's servers, booted one at a time (`python -m "
          "portable_spec_harness.serve_bench.sampling_sweep`)."),
    _knob("FIRST_BATCHES_PAIR", "llama8b_eagle", "The first-batches probe's pair (`python -m "
          "portable_spec_harness.serve_bench.first_batches`)."),
    _knob("FIRST_BATCHES_MODE", "dummy", "Its weights (the serving benchmark's `--mode`)."),
    _knob("FIRST_BATCHES_VARIANTS", "ours_mrv2,mrv2", "Its servers, booted one at a time."),
    _knob("FIRST_BATCHES_SIZES", "1,2,4,8,16,32", "Its batch sizes, increasing: a wave of each size, then its repeat."),
    _knob("REAL_SHAPES_PAIR", "llama8b_eagle3", "The real-shapes smoke's pair."),
    _knob("REAL_SHAPES_HEADS", "perfect,partial", "Its designed heads, one server each."),
    _knob("REAL_SHAPES_ENGINE", "upstream_v1", "The e2e engine variant it serves with."),
    # -- ci/gpu/mrv2_bench.sh (its header says why one CPU)
    _knob("MRV2_BENCH_PAIRS", "llama_eagle:attention:3,llama_eagle3:perfect:5",
          "`PAIR:MODEL_VARIANT:K`, comma-separated: one interleaved bench each.", MRV2_BENCH),
    _knob("MRV2_BENCH_CONCURRENCY", "1,4,16,64", "Concurrencies timed.", MRV2_BENCH),
    _knob("MRV2_BENCH_TOKENS", "512", "Output tokens per request.", MRV2_BENCH),
    _knob("MRV2_BENCH_REPEATS", "31", "Timed passes per cell.", MRV2_BENCH),
    _knob("MRV2_BENCH_BOOT_TIMEOUT", "500", "Seconds an engine may take to boot.", MRV2_BENCH),
    _knob("MRV2_BENCH_CPUS", "the host's middle CPU",
          "A `taskset` CPU list for the bench and every process it starts; `all` leaves them unpinned.", MRV2_BENCH),
    _knob("MRV2_BENCH_GC_HEAP", "frozen",
          "`frozen`: each engine's heap frozen after boot, as `vllm serve` does; `live`: as the child leaves it.",
          MRV2_BENCH),
    _knob("MRV2_BENCH_PROFILE", "", "A concurrency to profile each engine at after the timed passes. Unset: none.",
          MRV2_BENCH),
    # -- ci/gpu/tp2.sh
    _knob("TP2_STEPS", "matrix,boot,bench",
          "The tp2 stage's steps, of `matrix`, `boot`, `bench`, `serve` (the serving benchmark at `SERVE_BENCH_TP`) "
          "and `soak` (the soak at `SOAK_TP`, pairs default `llama_ctx_eagle3`, no sync pairs).", TP2),
    _knob("TP2_PARTS", "tp2",
          "The matrix parts of the tp2 step (`tp2_ctx`: issue 37's context, MLA and draft-model parts only).", TP2),
    _knob("TP2_BENCH_PAIRS", "perfect,partial", "Model variants of the TP=2 bench.", TP2),
    _knob("TP2_BENCH_VARIANTS", "upstream_v1,full_drafter", "Engines of the TP=2 bench.", TP2),
    _knob("TP2_BENCH_REPEATS", "3", "Timed passes per cell of the TP=2 bench.", TP2),
    # -- the GPU host's device tool
    _knob("OUT", "",
          "The folder the project's device tool brings back from the GPU host (the tool sets it): "
          "`ci/gpu/lane_and_pack.sh` packs a lane's output there; unset is an error.", "ci/gpu/lane_and_pack.sh"),
    _knob("LANE_STOP_GRACE_S", "45",
          "Seconds `ci/gpu/lane_and_pack.sh` gives the lane's processes after its limit's SIGTERM to end (the serving "
          "benchmark writes its final report on the way out) before it kills what is left and packs; keep the limit "
          "plus this inside the device call's timeout.", "ci/gpu/lane_and_pack.sh"),
    _knob("LEASE_CLOCK_FILE", "/tmp/lease_t0",
          "Where `ci/gpu-host/lease_clock.sh start` writes the host's time in a lease's first call and `limit` reads "
          "it back (a fresh machine has none: stage again).", "ci/gpu-host/lease_clock.sh"),
    _knob("STAGE_ROOT", "/tmp",
          "Where `ci/gpu-host/install.sh` collects a staged vLLM's carried parts (`gpu-wheels-<version>/`) and "
          "installs it (`site/` for 0.26.0, `site-<version>/` for another); the tests point it at a temporary "
          "folder.", "ci/gpu-host/install.sh"),
    _knob("LEASE_S", "1800",
          "The device lease's seconds `ci/gpu-host/lease_clock.sh limit` counts down from (the device tool's 30 "
          "minutes a session).", "ci/gpu-host/lease_clock.sh"),
    _knob("LEASE_OVERHEAD_S", "150",
          "Seconds `ci/gpu-host/lease_clock.sh limit` allows for what the device counts and the host's clock does "
          "not: the machine's start before the first call and the transfers (28-35 s through session 48's lease, "
          "90 s in session 50's), plus the last call's packing and return.", "ci/gpu-host/lease_clock.sh"),
)
BY_NAME: dict[str, LaneVar] = {var.name: var for var in VARIABLES}


def render_markdown() -> str:
    """The table ``docs/environment.md``'s second section holds (kept equal by ``tests/test_environment_doc.py``)."""
    rows = ["| variable | default | read by | meaning |", "|---|---|---|---|"]
    for var in VARIABLES:
        default = f"`{var.default}`" if var.default and " " not in var.default else (var.default or "unset")
        readers = ", ".join(f"`{path}`" for path in var.read_by)
        rows.append(f"| `{var.name}` | {default} | {readers} | {var.meaning} |")
    return "\n".join(rows) + "\n"
