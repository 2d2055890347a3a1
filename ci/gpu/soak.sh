#!/usr/bin/env bash
# The serving soak from its SOAK_* knobs (ci/lanes/cuda.sh's header lists them): the cuda lane's soak stage and
# ci/gpu/tp2.sh's soak step run it. Writes OUTDIR/soak/ and OUTDIR/soak.log.
#   bash ci/gpu/soak.sh OUTDIR      SOAK_TP=2: every server at tensor parallel 2 (ci/gpu/tp_flags.sh)
set -uo pipefail
out="${1:?usage: ci/gpu/soak.sh OUTDIR}"; py="${PYTHON:-python3}"
source "$(dirname "${BASH_SOURCE[0]}")/tp_flags.sh"
mkdir -p "$out"
# shellcheck disable=SC2046  # tp_flags' words are the flags
"$py" -m portable_spec_harness.soak "$out/soak" ${SOAK_PAIRS:+--pairs "$SOAK_PAIRS"} \
  ${SOAK_SYNC_PAIRS+--sync-pairs "$SOAK_SYNC_PAIRS"} ${SOAK_REQUESTS:+--requests "$SOAK_REQUESTS"} \
  $(tp_flags "${SOAK_TP:-1}") 2>&1 | tee "$out/soak.log"
exit "${PIPESTATUS[0]}"
