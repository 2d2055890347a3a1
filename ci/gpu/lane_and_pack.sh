#!/usr/bin/env bash
# For hosts that return few files (the project's device tool returns at most 8): run the cuda lane for some stages
# with a time limit, then pack everything it wrote into one archive.
#   ci/gpu/lane_and_pack.sh NAME SECONDS STAGE...   -> $OUT/NAME.tgz (lane output dir and its console log)
set -uo pipefail
name="$1"; limit="$2"; shift 2
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
work="/tmp/lane-$name"; mkdir -p "$work"
# FlashInfer's JIT cache from an earlier lease, where a call carries it (carry: [".gpu-wheels/jit-cache"]); the lane's
# console log says what was restored (ci/gpu-host/jit_cache.sh says why).
jit="$root/.gpu-wheels/jit-cache"; restored=""
[[ -d "$jit" ]] && restored=$(bash "$root/ci/gpu-host/jit_cache.sh" restore "$jit" 2>&1)
timeout "$limit" bash "$root/ci/lanes/cuda.sh" "$work" "$@" > "$work/console.log" 2>&1
rc=$?
echo "lane exit $rc" >> "$work/console.log"
[[ -n "$restored" ]] && echo "$restored" >> "$work/console.log"
# what this host built and no carried cache held comes back beside the archive, for the next lease
bash "$root/ci/gpu-host/jit_cache.sh" save "${OUT:-}" "$jit" >> "$work/console.log" 2>&1
tar czf "${OUT:?OUT must name the folder that comes back}/$name.tgz" -C /tmp "lane-$name"
grep -E "^=== |^jit cache|^BOOT|^tp2|^real-shapes|CHECKS|RESULT|passed|failed|Error|error|ours_over|ours@[a-z]*_over|_over_builtin_mrv2|^paired_|^runner: |^full collections|^stalled steps|^join probe|^sampling sweep" "$work/console.log" \
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
