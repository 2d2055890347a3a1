#!/usr/bin/env bash
# Issue 23's no-regression bench: Model Runner V2 on our CUDA platform (ours_platform_mrv2) against MRV2 on vLLM's
# built-in CUDA platform (builtin_mrv2), both with the runner vLLM picks, booted together and timed in turns
# (portable_spec/harness/e2e/interleave.py; medians of the passes, every pass kept), one bench per pair.
#   ci/gpu/mrv2_bench.sh OUTDIR   -> OUTDIR/bench-mrv2-<pair>-k<K>/bench_e2e.json + .png (summary key
#                                    ours_platform_mrv2_over_builtin_mrv2) and each engine's log
# Knobs: MRV2_BENCH_PAIRS (PAIR:MODEL_VARIANT:K,...; default the 100%-acceptance EAGLE pair, attention variant, K=3,
# and the EAGLE-3 pair, K=5), MRV2_BENCH_CONCURRENCY (default 1,4,16,64), MRV2_BENCH_TOKENS (output tokens per
# request, default 512), MRV2_BENCH_REPEATS (timed passes per cell, default 9), MRV2_BENCH_BOOT_TIMEOUT (default 420),
# MRV2_BENCH_GC_HEAP (frozen, the default: each engine's heap frozen after boot as vllm serve freezes it; live: as
# the bench child leaves it; on the H200 both gave 0 full collections in timed passes, since vLLM's in-process engine
# core freezes the heap itself: portable_spec/harness/e2e/gc_pauses.py), MRV2_BENCH_CPUS (a taskset CPU list, e.g. 2-7: the bench and every
# process it starts run on those CPUs only; default unpinned).
# The defaults are sized for a decision at the 0.98 bound: session 10's 128-token, 5-pass run measured 0.1-0.2 s per
# pass and spread +-30%; 512 tokens x 9 passes is ~1 s per pass, and the whole stage fits one 570 s call (est.).
# Session 12's H200 run (the same defaults) still spread +-30% per pass: the summary's paired_ours_platform_mrv2_vs_
# builtin_mrv2 gives, per cell, the median per-pass ratio, its bootstrap 95% interval and whether it decides the 0.98
# bound (holds / fails / undecided, with ~passes_to_decide); tests/test_mrv2_cuda_parity.py pins why the engines
# run the same steps. Every pass also times its engine steps (step_clock.py): paired_step_time_... pairs the
# engines' median steps (stalls left out) and stalls says how much each engine lost to stalled steps.
# A benchmark, not a test: it reports; the rows say which runner each engine built (runner, use_v2_model_runner).
set -uo pipefail
out="${1:?usage: ci/gpu/mrv2_bench.sh OUTDIR}"
py="${PYTHON:-python3}"
pin=()
[[ -n "${MRV2_BENCH_CPUS:-}" ]] && pin=(taskset -c "$MRV2_BENCH_CPUS")
rc=0
IFS=, read -ra pairs <<< "${MRV2_BENCH_PAIRS:-llama_eagle:attention:3,llama_eagle3:perfect:5}"
for spec in "${pairs[@]}"; do
  IFS=: read -r pair variant k <<< "$spec"
  echo "=== mrv2 bench: $pair ($variant) K=$k ==="
  "${pin[@]}" "$py" -m portable_spec bench e2e --out "$out/bench-mrv2-$pair-k$k" --pair "$pair" --model-variant "$variant" \
    --num-spec "$k" --variants builtin_mrv2,ours_platform_mrv2 --concurrency "${MRV2_BENCH_CONCURRENCY:-1,4,16,64}" \
    --tokens "${MRV2_BENCH_TOKENS:-512}" --repeats "${MRV2_BENCH_REPEATS:-9}" \
    --timeout "${MRV2_BENCH_BOOT_TIMEOUT:-420}" --gc-heap "${MRV2_BENCH_GC_HEAP:-frozen}" || rc=1
done
exit $rc
