#!/usr/bin/env bash
# The cuda lane: runs on the GPU host (H100) from the repository root and writes JSON results into OUTDIR.
#   ci/lanes/cuda.sh OUTDIR [STAGE ...]     stages: tests probe verify draft boot e2e musa-sim-e2e bench mrv2-bench tp2
#   soak serve-bench join-probe sampling-sweep first-batches version-span real-shapes (default: all but bench,
#   mrv2-bench, tp2, soak, serve-bench, join-probe, sampling-sweep, first-batches, version-span and real-shapes). tp2 needs 2 GPUs (skipped with one line otherwise): TP2_STEPS=matrix,boot,bench (the default;
#   also serve and soak) runs the tensor-parallel matrix parts (TP2_PARTS, default tp2; tp2_ctx: issue 37's context,
#   MLA and draft-model parts), the one-at-a-time cold-boot comparison, the TP=2 benchmark of TP2_BENCH_PAIRS (model
#   variants, default perfect,partial), and with serve / soak the serve-bench and soak stages below at
#   SERVE_BENCH_TP / SOAK_TP (default 2 there; the soak's pairs default to llama_ctx_eagle3, no sync pairs), with
#   NVLink multicast, the custom all-reduce and the all-reduce + RMSNorm fusion off (what vLLM 0.26.0 needs on a host
#   without multicast; ci/gpu/tp_flags.sh).
#   E2E_PARTS=perfect,dflash limits the e2e stage to parts of ci/gpu/v1_drafter_matrix.py (E2E_PARTS=mrv2: issue 23's
#   Model Runner V2 parts, MRV2 on our CUDA platform vs on vLLM's); E2E_PARALLEL=N runs N parts side by side on the
#   GPU (default 3; correctness only, never timing); E2E_CONCURRENT=1 also boots each part's variants at once. The
#   bench stage reads
#   BENCH_PAIR (zoo pair, default llama_eagle), BENCH_MODEL_VARIANT (attention|perfect|partial), BENCH_VARIANTS, BENCH_K (speculative tokens, default 3),
#   BENCH_CONCURRENCY, BENCH_REPEATS, BENCH_BOOT_TIMEOUT and BENCH_PROFILE_CONCURRENCY (default 1); its profile carries the per-step breakdown, printed
#   as a table at the end of bench_e2e.log and drawn below the curves in bench_e2e.png.
#   musa-sim-e2e: real vLLM engines on the MUSA code path with only the device identity simulated (labelled musa-sim,
#   ci/gpu/musa_sim_e2e.py); MUSA_SIM_PARTS limits its parts (musa_sim_mrv2_eagle,musa_sim_mrv2_dflash,
#   musa_sim_mrv2_budget: under Model Runner V2), MUSA_SIM_PARALLEL (default 4) runs them side by side,
#   MUSA_SIM_CONCURRENT (non-empty) boots each part's variants at once too.
#   mrv2-bench: MRV2 on our CUDA platform vs MRV2 on vLLM's, interleaved, per pair (ci/gpu/mrv2_bench.sh: its
#   MRV2_BENCH_* knobs; key ours_platform_mrv2_over_builtin_mrv2).
#   soak: real `vllm serve` processes under a seeded load (issue 22, python -m portable_spec_harness.soak), every server
#   of every pair at once on the GPU, bounded to 520 s; SOAK_PAIRS (default llama_ctx_eagle,llama_ctx_eagle3,
#   mixtral_eagle), SOAK_SYNC_PAIRS (pairs that also run without async scheduling; default llama_ctx_eagle, empty for
#   none), SOAK_REQUESTS (per server, default 96) and SOAK_TP (tensor parallel of every server, default 1; >= 2 with
#   the two switches above). Writes OUTDIR/soak/soak.json and a table (ci/gpu/soak.sh).
#   serve-bench: `vllm serve` per variant driven by vLLM's own `vllm bench serve` (issue 24, python -m
#   portable_spec_harness.serve_bench): SERVE_BENCH_PAIR (a prepared pair folder, a zoo pair or a real_shapes pair
#   name such as llama8b_draft1b, default llama_eagle), SERVE_BENCH_MODE (zoo variant, or dummy|designed for a
#   real_shapes pair, default attention), SERVE_BENCH_HEAD (a designed real_shapes pair's draft: perfect, the default,
#   or partial), SERVE_BENCH_VARIANTS (default upstream_v1,ours,mrv2; a name ending in @async or @sync is one more
#   server of that variant with async scheduling on or off, e.g. upstream_v1,ours,ours@async),
#   SERVE_BENCH_CONCURRENCY (default 1,2,8,32), SERVE_BENCH_ROUNDS (default 3),
#   SERVE_BENCH_FIRST_ROUND (rotation offset when one benchmark is split over calls; pool them with python -m
#   portable_spec_harness.serve_bench.combine; SERVE_BENCH_SIZING_FROM, an earlier call's serve_bench.json carried
#   in the tree, keeps its prompts and one warm pass per cell; SERVE_BENCH_SIZE_PER_VARIANT (non-empty) sizes each
#   variant's runs from its own warm run, not the fastest one's; SERVE_BENCH_KEEP_SERVERS=FILE leaves the servers up for
#   the next call, whose SERVE_BENCH_REUSE_SERVERS=FILE uses them instead of booting and skips the warm runs of the cells
#   they served that SERVE_BENCH_SIZING_FROM sized, but the first (in_turn: the last round's last server, which the
#   next call's first round starts with); SERVE_BENCH_SERVER_MAX_NUM_SEQS / SERVE_BENCH_SERVER_MAX_INPUT_LEN
#   shape every call's servers as the chain's widest, default its highest concurrency / longest input, so a call of
#   fewer cells reuses them; SERVE_BENCH_KV_CACHE_GIB: each server's KV cache per GPU in GiB instead of the sized
#   default), SERVE_BENCH_NO_PHASE_CLOCK (non-empty: skip the phase clock, which otherwise runs after the timed
#   rounds), SERVE_BENCH_CLOCK_CELL (the cell it runs in, e.g. in4096/sampled/c8, one of the call's; default c=1 at
#   the first input length and sampling), SERVE_BENCH_ASYNC_SCHEDULING (default|on|off, on every variant without a
#   suffix),
#   SERVE_BENCH_INPUT_LEN (comma-separated prompt lengths, one cell each, default 256) / SERVE_BENCH_OUTPUT_LEN
#   (default 256), SERVE_BENCH_SAMPLING (greedy, sampled or greedy,sampled, default greedy),
#   SERVE_BENCH_PROMPTS_PER_SLOT (the fewest, default 2), SERVE_BENCH_MIN_RUN_S (each cell's timed runs sized from its
#   warm run to last this long, shorter ones flagged; default 10, 0: the prompts per slot as given),
#   SERVE_BENCH_PLACEMENT (auto|together|in_turn; auto estimates per GPU), SERVE_BENCH_BUDGET (seconds after which no
#   round starts, default 480: the stage stays under 9 minutes) and SERVE_BENCH_TP (tensor parallel of every server,
#   default 1; >= 2 with the two switches above). Writes OUTDIR/serve-bench/serve_bench.{json,txt,png}
#   (ci/gpu/serve_bench.sh).
#   join-probe: where a served engine's time goes when a long prompt joins a decode (issue 41,
#   python -m portable_spec_harness.serve_bench.join_probe: stalls per repeat with the engine thread's sampled stacks;
#   the stage fails when ours stalls over 100 ms or compiles a kernel after boot).
#   sampling-sweep: every request kind a client can ask (top-k, min-p, penalties, logprobs counts, seeded or not) alone,
#   beside a greedy request and all at once, then vLLM's JIT monitor lines (issue 41,
#   python -m portable_spec_harness.serve_bench.sampling_sweep); SWEEP_VARIANTS (default ours,upstream_v1); the stage
#   fails when ours compiles a kernel after boot or fails a kind a baseline serves.
#   first-batches: whether a served engine pauses at its first batch of each size after boot (issue 41,
#   python -m portable_spec_harness.serve_bench.first_batches: a wave of N sampled requests, then its repeat, per size,
#   with the engine thread's sampled stacks over a first wave that paused); FIRST_BATCHES_PAIR / _MODE (default
#   llama8b_eagle, dummy), FIRST_BATCHES_VARIANTS (default ours_mrv2,mrv2), FIRST_BATCHES_SIZES (default
#   1,2,4,8,16,32); the stage fails when ours pauses over 250 ms or compiles a kernel after boot.
#   version-span: what matters on another vLLM of the span (issue 26, ci/gpu/version_span.py, ~6 min): the version
#   gate's verdicts, the hook-point tests, tests/gpu, and the e2e matrix's SPAN_PARTS (default perfect, variants
#   booted at once) where our V1 drafter exists there, else vllm_boot.py --quick. Run it with VLLM_SITE naming that
#   vLLM.
#   real-shapes: a designed real-shape pair through `vllm serve` (issue 24, python -m
#   portable_spec_harness.real_shapes.smoke): one server per head, greedy outputs and acceptance per position against
#   the design; REAL_SHAPES_PAIR (default llama8b_eagle3), REAL_SHAPES_HEADS (default perfect,partial),
#   REAL_SHAPES_ENGINE (an e2e engine variant, default upstream_v1). Writes OUTDIR/real_shapes/smoke.json.
# vLLM must be importable: VLLM_SITE (default /tmp/site, vLLM 0.26.0 on the project's GPU host, see DEVELOPERS.md) goes
# first on PYTHONPATH; /tmp/site-<version> is where .gpu-wheels' install.sh puts another version.
# Each stage's exit code is recorded in OUTDIR/cuda_lane.json; the lane fails if any stage failed.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
out="${1:?usage: ci/lanes/cuda.sh OUTDIR [STAGE ...]}"; shift
stages=("$@"); [[ ${#stages[@]} -eq 0 ]] && stages=(tests probe verify draft boot e2e musa-sim-e2e)
mkdir -p "$out"
py="${PYTHON:-python3}"
# Install before PYTHONPATH points at the staged vLLM: the editable install (and its entry points, which vLLM's
# plugin loader reads) must land in the interpreter's own site-packages.
"$py" -m pip install -q --no-deps --no-build-isolation -e . -e harness >"$out/install.log" 2>&1 || { cat "$out/install.log"; exit 1; }
# Unset once read: vLLM warns about (or, strict, refuses) an environment variable VLLM_* it does not know.
site="${VLLM_SITE:-/tmp/site}"; explicit="${VLLM_SITE:+yes}"; unset VLLM_SITE
if [[ -d "$site" ]]; then export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
elif [[ -n "$explicit" ]]; then echo "VLLM_SITE=$site is no directory: install that vLLM first (bash .gpu-wheels/carry/install.sh)"; exit 2; fi
"$py" -c "import importlib.metadata as m; assert any(e.name == 'portable_spec' for e in m.entry_points(group='vllm.platform_plugins'))" \
  || { echo "portable_spec's vLLM entry points are not installed"; exit 1; }
export PYTHONUNBUFFERED=1 PORTABLE_SPEC_TEST_VLLM_PLATFORM=native

declare -A rc
for stage in "${stages[@]}"; do
  start=$(date +%s)
  echo "=== cuda lane: $stage ==="
  case "$stage" in
    tests)  PORTABLE_SPEC_GPU_OUT="$out" "$py" -m pytest -q -m gpu tests/gpu --junitxml="$out/cuda_pytest.xml" 2>&1 | tee "$out/cuda_pytest.log" ;;
    probe)  "$py" -m portable_spec probe --platform cuda --json > "$out/probe_cuda.json" ;;
    verify) "$py" -m portable_spec probe --platform cuda --verify --json > "$out/attention_verify.json" ;;
    draft)  "$py" ci/gpu/draft_suite.py "$out" 2>&1 | tee "$out/draft_suite.log" ;;
    boot)   "$py" ci/gpu/vllm_boot.py "$out" 2>&1 | tee "$out/vllm_boot.log" ;;
    e2e)    "$py" ci/gpu/v1_drafter_matrix.py "$out" --parallel "${E2E_PARALLEL:-3}" ${E2E_PARTS:+--parts "$E2E_PARTS"} \
              ${E2E_CONCURRENT:+--concurrent-variants} 2>&1 | tee "$out/v1_drafter_e2e.log" ;;
    musa-sim-e2e) "$py" ci/gpu/musa_sim_e2e.py "$out/musa_sim" --parallel "${MUSA_SIM_PARALLEL:-4}" \
              ${MUSA_SIM_PARTS:+--parts "$MUSA_SIM_PARTS"} ${MUSA_SIM_CONCURRENT:+--concurrent-variants} \
              2>&1 | tee "$out/musa_sim_e2e.log" ;;
    # The attention variant of the 100%-acceptance EAGLE pair: same cost as the plain one, but its acceptance length
    # is 1+K only if the drafter's positions, slots and KV reads are right, so the benchmark also checks them.
    bench)  "$py" -m portable_spec bench e2e --out "$out/bench-e2e" --profile --profile-concurrency "${BENCH_PROFILE_CONCURRENCY:-1}" --pair "${BENCH_PAIR:-llama_eagle}" --model-variant "${BENCH_MODEL_VARIANT:-attention}" \
              --num-spec "${BENCH_K:-3}" --variants "${BENCH_VARIANTS:-nospec,upstream_v1,full_drafter_unfused,full_drafter,mrv2}" \
              --timeout "${BENCH_BOOT_TIMEOUT:-420}" --concurrency "${BENCH_CONCURRENCY:-1,4,16,64}" \
              --repeats "${BENCH_REPEATS:-5}" 2>&1 | tee "$out/bench_e2e.log" ;;
    mrv2-bench) bash ci/gpu/mrv2_bench.sh "$out" 2>&1 | tee "$out/mrv2_bench.log" ;;
    boottime) "$py" -m portable_spec_harness.e2e.boot_time "$out/boot" --variants "${BOOT_VARIANTS:-full_drafter,upstream_v1}" \
              ${BOOT_WARM:+--warm} 2>&1 | tee "$out/boot_time.log" ;;
    tp2)    bash ci/gpu/tp2.sh "$out" ;;
    version-span) "$py" ci/gpu/version_span.py "$out" ${SPAN_PARTS:+--parts "$SPAN_PARTS"} 2>&1 | tee "$out/version_span.log" ;;
    soak)   bash ci/gpu/soak.sh "$out" ;;
    serve-bench) bash ci/gpu/serve_bench.sh "$out" ;;
    join-probe) "$py" -m portable_spec_harness.serve_bench.join_probe "$out/join-probe" 2>&1 | tee "$out/join_probe.log" ;;
    sampling-sweep) "$py" -m portable_spec_harness.serve_bench.sampling_sweep "$out/sampling-sweep" \
              --variants "${SWEEP_VARIANTS:-ours,upstream_v1}" 2>&1 | tee "$out/sampling_sweep.log" ;;
    first-batches) "$py" -m portable_spec_harness.serve_bench.first_batches "$out/first-batches" \
              --pair "${FIRST_BATCHES_PAIR:-llama8b_eagle}" --mode "${FIRST_BATCHES_MODE:-dummy}" \
              --variants "${FIRST_BATCHES_VARIANTS:-ours_mrv2,mrv2}" --sizes "${FIRST_BATCHES_SIZES:-1,2,4,8,16,32}" \
              2>&1 | tee "$out/first_batches.log" ;;
    real-shapes) "$py" -m portable_spec_harness.real_shapes.smoke "$out/real_shapes" \
              --pair "${REAL_SHAPES_PAIR:-llama8b_eagle3}" --heads "${REAL_SHAPES_HEADS:-perfect,partial}" \
              --engine "${REAL_SHAPES_ENGINE:-upstream_v1}" 2>&1 | tee "$out/real_shapes.log" ;;
    *) echo "unknown stage $stage"; rc[$stage]=2; continue ;;
  esac
  rc[$stage]=${PIPESTATUS[0]}
  echo "=== $stage: exit ${rc[$stage]} in $(( $(date +%s) - start )) s ==="
done

"$py" - "$out" "$(for s in "${!rc[@]}"; do echo "$s=${rc[$s]}"; done)" <<'PY'
import json, sys
from portable_spec_harness.soak.report import environment  # device, GPU count, versions, date, commit: one place
out, pairs = sys.argv[1], [p.split("=") for p in sys.argv[2].split()]
summary = {"lane": "cuda", **environment(), "stages": {k: int(v) for k, v in pairs}}
json.dump(summary, open(f"{out}/cuda_lane.json", "w"), indent=1)
print(json.dumps(summary))
sys.exit(1 if any(int(v) for _, v in pairs) else 0)
PY
