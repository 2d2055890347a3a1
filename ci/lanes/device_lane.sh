# Sourced by the musa and rocm lanes: repository root, output folder, an interpreter with torch, the project
# installed into it.  Usage: source ci/lanes/device_lane.sh LANE OUTDIR_ARG   (sets root, out, py; fail=0)
lane="$1"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"; cd "$root"
out="${2:-bench/results/$lane-lane}"; mkdir -p "$out"
py="${PYTHON:-python3}"
"$py" -c "import torch" 2>/dev/null || { echo "ci/lanes/$lane.sh: $py cannot import torch; set PYTHON to an interpreter that has it (e.g. the virtualenv ci/lanes/cpu.sh builds)" >&2; exit 2; }
"$py" -m pip install -q --no-deps --no-build-isolation -e . -e harness >/dev/null
fail=0
