#!/usr/bin/env bash
# For hosts that return few files (the project's device tool returns at most 8): run the cuda lane for some stages
# with a time limit, then pack everything it wrote into one archive.
#   ci/gpu/lane_and_pack.sh NAME SECONDS STAGE...   -> $OUT/NAME.tgz (lane output dir and its console log)
# At SECONDS the lane's whole process group gets SIGTERM, and the wrapper packs only once every process of it has
# ended, or LANE_STOP_GRACE_S (default 45) after the SIGTERM, when SIGKILL ends what is left: the serving benchmark
# turns SIGTERM into SystemExit, stops its servers (up to 20 s each) and only then writes its final report, which an
# archive packed at once would lack (it held only serve_bench.partial.json). So SECONDS plus the grace plus the
# packing must fit in the device call's timeout: e.g. 540 in a call of 600 s. Exit status: 124 when the limit hit,
# else the lane's own. GNU timeout is no use here: it signals the group, but the lane's bash dies at once and
# timeout returns while the benchmark is still writing.
set -uo pipefail
name="$1"; limit="$2"; shift 2
grace="${LANE_STOP_GRACE_S:-45}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
work="/tmp/lane-$name"; mkdir -p "$work"
# FlashInfer's JIT cache from an earlier lease, where a call carries it (carry: [".gpu-wheels/jit-cache"]); the lane's
# console log says what was restored (ci/gpu-host/jit_cache.sh says why).
jit="$root/.gpu-wheels/jit-cache"; restored=""
[[ -d "$jit" ]] && restored=$(bash "$root/ci/gpu-host/jit_cache.sh" restore "$jit" "${VLLM_SITE:-/tmp/site}" 2>&1)
# The lane in a process group of its own: a background job of this (non-interactive) shell leads no group, so setsid
# runs it in the very process $! names, and its pid is the group's id.
setsid bash "$root/ci/lanes/cuda.sh" "$work" "$@" > "$work/console.log" 2>&1 &
lane=$!
stopped=$(mktemp)  # the watchdog writes the time of its SIGTERM here; empty: the lane ended by itself
( trap 'kill "$sleeper" 2>/dev/null; exit 0' TERM
  sleep "$limit" & sleeper=$!; wait "$sleeper" || exit 0
  date +%s > "$stopped"; kill -TERM -- "-$lane" 2>/dev/null ) > /dev/null 2>&1 &
watchdog=$!
group_alive() {  # a process of the lane's group still runs (an orphan's zombie that no init reaps does not count)
  kill -0 -- "-$lane" 2>/dev/null || return 1
  [[ -d /proc/self ]] || return 0
  local stat line state pgrp
  for stat in /proc/[0-9]*/stat; do
    read -r line < "$stat" 2>/dev/null || continue
    read -r state _ pgrp _ <<< "${line##*) }"  # "PID (COMM) STATE PPID PGRP ...": COMM may hold spaces
    [[ "$pgrp" == "$lane" && "$state" != Z ]] && return 0
  done
  return 1
}
wait "$lane"; rc=$?
kill "$watchdog" 2>/dev/null; wait "$watchdog" 2>/dev/null
if [[ -s "$stopped" ]]; then
  rc=124; term_at=$(cat "$stopped")
  while group_alive && (( $(date +%s) - term_at < grace )); do sleep 0.2; done
  if group_alive; then
    kill -KILL -- "-$lane" 2>/dev/null
    stop="lane exit 124 after $limit s; lane processes killed after $grace s"
  else
    stop="lane exit 124 after $limit s; lane processes ended $(( $(date +%s) - term_at )) s after SIGTERM"
  fi
  echo "$stop" >> "$work/console.log"
  echo "$stop"
else
  echo "lane exit $rc" >> "$work/console.log"
fi
rm -f "$stopped"
[[ -n "$restored" ]] && echo "$restored" >> "$work/console.log"
# what this host built and no carried cache held comes back beside the archive, for the next lease
bash "$root/ci/gpu-host/jit_cache.sh" save "${OUT:-}" "$jit" >> "$work/console.log" 2>&1
tar czf "${OUT:?OUT must name the folder that comes back}/$name.tgz" -C /tmp "lane-$name"
grep -E "^=== |^jit cache|^BOOT|^tp2|^real-shapes|CHECKS|RESULT|passed|failed|Error|error|ours_over|ours@[a-z]*_over|_over_builtin_mrv2|^paired_|^runner: |^full collections|^stalled steps|^join probe|^sampling sweep|^first batches" "$work/console.log" \
  | cut -c1-400 | tail -60
# the bench's per-step breakdown table, when it printed one
sed -n '/^ms per decode step, host \/ device/,/^steps /p' "$work/console.log" | cut -c1-200
sed -n '/^ms per step, wall \/ off-CPU/,/^steps /p' "$work/console.log" | cut -c1-200
sed -n '/^ms per step (inclusive) \/ calls per step/,/^$/p' "$work/console.log" | cut -c1-200
grep "^scopes never seen" "$work/console.log" | cut -c1-400
# the soak's table, when it printed one
sed -n '/^pair\/server /,/^soak: /p' "$work/console.log" | cut -c1-260
# the serving benchmark's table, when it printed one
sed -n '/^serve bench: .*K=/,/^serve bench: \(complete\|incomplete\)/p' "$work/console.log" | cut -c1-220 | head -80
exit $rc
