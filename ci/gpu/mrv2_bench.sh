#!/usr/bin/env bash
# Issue 23's no-regression bench: Model Runner V2 on our CUDA platform (ours_platform_mrv2) against MRV2 on vLLM's
# built-in CUDA platform (builtin_mrv2), both with the runner vLLM picks, booted together and timed in turns
# (harness/portable_spec_harness/e2e/interleave.py; medians of the passes, every pass kept), one bench per pair.
#   ci/gpu/mrv2_bench.sh OUTDIR   -> OUTDIR/bench-mrv2-<pair>-k<K>/bench_e2e.json + .png (summary key
#                                    ours_platform_mrv2_over_builtin_mrv2) and each engine's log
# Several calls' reports of one pair are judged together by `python -m portable_spec bench pool --out DIR FILE...`
# (harness/portable_spec_harness/e2e/pool.py): passes pair only within a report, the pooled cells decide the 0.98 bound.
# Knobs: MRV2_BENCH_PAIRS (PAIR:MODEL_VARIANT:K,...; default the 100%-acceptance EAGLE pair, attention variant, K=3,
# and the EAGLE-3 pair, K=5), MRV2_BENCH_CONCURRENCY (default 1,4,16,64), MRV2_BENCH_TOKENS (output tokens per
# request, default 512), MRV2_BENCH_REPEATS (timed passes per cell, default 31), MRV2_BENCH_BOOT_TIMEOUT (default
# 500: pinned to one CPU, a cold compile cache boots the EAGLE-3 pair in ~4 min),
# MRV2_BENCH_CPUS (a taskset CPU list: the bench and every process it starts run on those CPUs only; default one CPU,
# the middle one of the host's; "all" leaves them unpinned), MRV2_BENCH_GC_HEAP (frozen, the default: each engine's
# heap frozen after boot as vllm serve freezes it; live: as the bench child leaves it; on the H200 both gave 0 full
# collections in timed passes, since vLLM's in-process engine core freezes the heap itself: gc_pauses.py),
# MRV2_BENCH_PROFILE (a concurrency: after the timed passes, profile each engine there; on one CPU the profiler's
# own threads compete with the engine, so read it as launches and phase shares, not as host time).
# Why one CPU: the engines are host-bound (the GPU is 8-25% busy) and only one engine runs at a time. Unpinned on
# the H200 (a KVM guest), a pass's median step was either ~2.5 or ~3.5-4 ms at random, on either engine, with
# adjacent passes uncorrelated (the busy thread lands on a fast or a slow vCPU), so the paired per-pass ratio spread
# +-20% and 114 passes could not decide 0.98. Pinned to 2-7 it stayed so. With both engines on the same single CPU
# the paired ratios tightened to +-1-2% per boot (step_clock.py's median step confirms it is the steady step, not
# stalls), and 99 (EAGLE) / 171 (EAGLE-3) pooled passes decided every cell.
# A benchmark, not a test: it reports; the rows say which runner each engine built (runner, use_v2_model_runner).
set -uo pipefail
out="${1:?usage: ci/gpu/mrv2_bench.sh OUTDIR}"
py="${PYTHON:-python3}"
cpus="${MRV2_BENCH_CPUS:-$(( $(nproc) / 2 ))}"
pin=()
[[ "$cpus" != all ]] && pin=(taskset -c "$cpus")
echo "mrv2 bench: CPUs ${cpus}"
rc=0
IFS=, read -ra pairs <<< "${MRV2_BENCH_PAIRS:-llama_eagle:attention:3,llama_eagle3:perfect:5}"
for spec in "${pairs[@]}"; do
  IFS=: read -r pair variant k <<< "$spec"
  echo "=== mrv2 bench: $pair ($variant) K=$k ==="
  "${pin[@]}" "$py" -m portable_spec bench e2e --out "$out/bench-mrv2-$pair-k$k" --pair "$pair" --model-variant "$variant" \
    --num-spec "$k" --variants builtin_mrv2,ours_platform_mrv2 --concurrency "${MRV2_BENCH_CONCURRENCY:-1,4,16,64}" \
    --tokens "${MRV2_BENCH_TOKENS:-512}" --repeats "${MRV2_BENCH_REPEATS:-31}" \
    --timeout "${MRV2_BENCH_BOOT_TIMEOUT:-500}" --gc-heap "${MRV2_BENCH_GC_HEAP:-frozen}" \
    ${MRV2_BENCH_PROFILE:+--profile --profile-concurrency "$MRV2_BENCH_PROFILE"} || rc=1
done
exit $rc
