#!/usr/bin/env bash
# The device lease's clock on the GPU host, so a call late in a chain sets its own limit from the time really left.
#   ci/gpu-host/lease_clock.sh start                  write the host's time (the first call of a lease: a staging call)
#   ci/gpu-host/lease_clock.sh limit KEEP [CAP]       print the seconds this call may run: the lease's seconds
#                                                     (LEASE_S, 1800) less what the device counts that this host's
#                                                     clock does not (LEASE_OVERHEAD_S, 150: the machine's start
#                                                     before the first call and the transfers, 28-35 s through
#                                                     session 48's lease but 90 s in session 50's, plus a minute for
#                                                     the last call's packing and its files' way back), less the
#                                                     seconds since `start`, less KEEP (left for the calls after this
#                                                     one), at most CAP (555); exit 1 with one line where `start` never
#                                                     ran on this host (a fresh machine: stage again)
# Why: the calls of one message run back to back with no reply between them (a reply that comes after the host's 30 s
# idle release loses the kept servers and the staging), so a chain's later calls cannot be sized from the device
# tool's budget_left_s; a call that outlasts the lease is killed before its wrapper packs, and its results are lost.
# With the limit from this clock, the serving benchmark's --budget-s (limit less 10 s) ends the call in time.
# Use: `L=$(bash ci/gpu-host/lease_clock.sh limit 340) && [ "$L" -gt 330 ] && SERVE_BENCH_BUDGET=$((L-10)) bash
# ci/gpu/lane_and_pack.sh NAME "$L" serve-bench`.
set -euo pipefail
clock="${LEASE_CLOCK_FILE:-/tmp/lease_t0}"
case "${1:-}" in
  start) date +%s > "$clock" ;;
  limit)
    keep="${2:?usage: lease_clock.sh limit KEEP [CAP]}"; cap="${3:-555}"
    [[ -s "$clock" ]] || { echo "lease_clock: no $clock on this host: run 'lease_clock.sh start' in the lease's first call (a fresh machine: stage again)" >&2; exit 1; }
    left=$(( ${LEASE_S:-1800} - ${LEASE_OVERHEAD_S:-150} - ($(date +%s) - $(cat "$clock")) - keep ))
    echo $(( left < cap ? left : cap )) ;;
  *) echo "usage: lease_clock.sh start | limit KEEP [CAP]" >&2; exit 2 ;;
esac
