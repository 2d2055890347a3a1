#!/usr/bin/env bash
# The serving benchmark from its SERVE_BENCH_* knobs (ci/lanes/cuda.sh's header lists them): the cuda lane's
# serve-bench stage and ci/gpu/tp2.sh's serve step run it. Writes OUTDIR/serve-bench/ and OUTDIR/serve_bench.log.
#   bash ci/gpu/serve_bench.sh OUTDIR      SERVE_BENCH_TP=2: every server at tensor parallel 2 (ci/gpu/tp_flags.sh)
set -uo pipefail
out="${1:?usage: ci/gpu/serve_bench.sh OUTDIR}"; py="${PYTHON:-python3}"
source "$(dirname "${BASH_SOURCE[0]}")/tp_flags.sh"
mkdir -p "$out"
# shellcheck disable=SC2046  # tp_flags' words are the flags
"$py" -m portable_spec_harness.serve_bench --out "$out/serve-bench" --pair "${SERVE_BENCH_PAIR:-llama_eagle}" \
  --mode "${SERVE_BENCH_MODE:-attention}" ${SERVE_BENCH_HEAD:+--head "$SERVE_BENCH_HEAD"} \
  --variants "${SERVE_BENCH_VARIANTS:-upstream_v1,ours,mrv2}" \
  --concurrency "${SERVE_BENCH_CONCURRENCY:-1,2,8,32}" --rounds "${SERVE_BENCH_ROUNDS:-3}" \
  --first-round "${SERVE_BENCH_FIRST_ROUND:-0}" ${SERVE_BENCH_NO_PHASE_CLOCK:+--no-phase-clock} \
  ${SERVE_BENCH_CLOCK_CELL:+--clock-cell "$SERVE_BENCH_CLOCK_CELL"} \
  --async-scheduling "${SERVE_BENCH_ASYNC_SCHEDULING:-default}" \
  --input-len "${SERVE_BENCH_INPUT_LEN:-256}" --output-len "${SERVE_BENCH_OUTPUT_LEN:-256}" \
  --sampling "${SERVE_BENCH_SAMPLING:-greedy}" --min-run-s "${SERVE_BENCH_MIN_RUN_S:-10}" \
  --prompts-per-slot "${SERVE_BENCH_PROMPTS_PER_SLOT:-2}" --placement "${SERVE_BENCH_PLACEMENT:-auto}" \
  ${SERVE_BENCH_SIZING_FROM:+--sizing-from "$SERVE_BENCH_SIZING_FROM"} \
  ${SERVE_BENCH_SIZE_PER_VARIANT:+--size-per-variant} \
  ${SERVE_BENCH_KEEP_SERVERS:+--keep-servers "$SERVE_BENCH_KEEP_SERVERS"} \
  ${SERVE_BENCH_REUSE_SERVERS:+--reuse-servers "$SERVE_BENCH_REUSE_SERVERS"} \
  ${SERVE_BENCH_SERVER_MAX_NUM_SEQS:+--server-max-num-seqs "$SERVE_BENCH_SERVER_MAX_NUM_SEQS"} \
  ${SERVE_BENCH_SERVER_MAX_INPUT_LEN:+--server-max-input-len "$SERVE_BENCH_SERVER_MAX_INPUT_LEN"} \
  ${SERVE_BENCH_KV_CACHE_GIB:+--kv-cache-gib "$SERVE_BENCH_KV_CACHE_GIB"} \
  --budget-s "${SERVE_BENCH_BUDGET:-480}" $(tp_flags "${SERVE_BENCH_TP:-1}") 2>&1 | tee "$out/serve_bench.log"
exit "${PIPESTATUS[0]}"
