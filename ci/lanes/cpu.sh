#!/usr/bin/env bash
# The cpu lane, over the vLLM version span (issue 26). Each vLLM version has its own virtualenv, built (or reused) by
# ci/lanes/cpu_venv.sh and keyed by the hash of its requirements file and recipe: ci/requirements-cpu.txt (vLLM
# 0.26.0, the main run) and ci/requirements-cpu-<version>.txt (the other versions of the span). Each gets the project
# installed editable (vLLM finds our entry points through it).
# - vLLM 0.26.0: the Triton 3.2 front-end check (its triton==3.2.0 virtualenv from ci/lanes/triton32_venv.sh; every
#   MUSA-path kernel compiled for an NVIDIA sm_90 and an AMD gfx942 target, the AMD one linked by Debian's lld
#   package's ld.lld; fails unless every MUSA-path kernel passes both backends and the static rules with substitutes
#   bound), beside it the ROCm compile step (every ROCm-path kernel built
#   for gfx942 and gfx90a with the lane's Triton; fails when one fails on a target ROCm serves), then the whole suite
#   (which reuses the Triton 3.2 check's report);
# - every other version: the span's tests (tests/version_span.py: unit, config, plugin and hook-point tests), where
#   what that vLLM cannot have is skipped with the version gate's one-line reason; the versions one after the other,
#   in the background beside the main suite, their log printed after it.
# Every run writes pytest's JUnit XML; ci/versions_report.py turns them into versions.json (passed / failed / skipped
# per version, and what is unsupported there and why) in PORTABLE_SPEC_LANE_OUT (kept) or a temporary folder, and
# the lane prints one line per version. The lane fails when any version's tests fail; pytest's exit code 5 (no tests
# collected) is a failure. Works on a fresh machine.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
log() { printf '[cpu lane] %s\n' "$*"; }
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
out="${PORTABLE_SPEC_LANE_OUT:-$work/out}"; mkdir -p "$out"

# A virtualenv with the project installed; prints its interpreter.
# --check-build-dependencies: without build isolation pip would build with whatever setuptools the venv has;
# pyproject's SPDX license string needs setuptools>=77 (torch's own requirement brings it).
# setuptools warns at every editable install ("folders in your working directory with the same name as your package
# ..."): advice, not a fault. The install's output goes to the lane's out folder and reaches the console only when the
# install fails, so a green log has no line that reads like one.
# Each virtualenv's bytecode cache is pruned here, once per lane run (ci/bytecode_cache.py), before any process of
# the lane writes to it.
lane_python() {
  local python log
  python="$(bash ci/lanes/cpu_venv.sh "$1")"
  log="$out/install-$(basename "$1" .txt).log"
  "$python" -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation \
    --check-build-dependencies -e "$root" -e "$root/harness" >"$log" 2>&1 || { cat "$log" >&2; return 1; }
  "$python" "$root/ci/bytecode_cache.py" "$(bytecode_cache_of "$python")"
  echo "$python"
}
vllm_of() { grep -E '^vllm==' "$1" | cut -d= -f3; }
# Runs PYTHON ARGS... with the bytecode of what it imports cached in its virtualenv's bytecode/ folder: the lane's
# virtualenvs are installed without bytecode (ci/lanes/cpu_venv.sh), and without a cache every process would compile
# vLLM's modules again. The prefix keeps the checkout free of __pycache__ folders, as PYTHONDONTWRITEBYTECODE did;
# lane_python has ci/bytecode_cache.py drop what earlier checkouts left there.
bytecode_cache_of() { echo "$(dirname "$(dirname "$1")")/bytecode"; }
with_bytecode_cache() {
  PYTHONDONTWRITEBYTECODE= PYTHONPYCACHEPREFIX="$(bytecode_cache_of "$1")" "$@"
}

export PYTHONDONTWRITEBYTECODE=1
export TRITON_INTERPRET=1
# tests/lane_tools.py: under the lane a test that needs the Triton interpreter or the Triton 3.2 Python fails
# where either is missing, instead of skipping as it does on a developer's machine.
export PORTABLE_SPEC_LANE=cpu
# tests/test_cpu_install.py resolves the README's install lines against this machine image's CPU wheel and PyPI
# mirrors (/opt/wheels, /opt/pypi*): the lane expects them, so the test fails rather than skips where they are missing.
# A runner outside the image (GitHub's, .github/workflows/cpu.yml) says "optional".
export PORTABLE_SPEC_CPU_INSTALL_MIRRORS="${PORTABLE_SPEC_CPU_INSTALL_MIRRORS:-required}"
failed=()

# Runs pytest for one version into $out/<version>/junit.xml; records the version in $failed when it fails.
run_pytest() {
  local version="$1" python="$2"; shift 2
  mkdir -p "$out/$version"
  log "vLLM $version: torch $("$python" -c 'import torch; print(torch.__version__)'), pytest $*"
  local rc=0
  # Each run's temporary folders (the model zoo's weights among them, some GB) go under the lane's own folder,
  # removed when the lane exits: pytest's default keeps the last three runs' folders in the system's temp folder,
  # and a machine running the lane again and again filled its disk with them.
  # vLLM caches what its model registry learns about a model class (found in a fresh interpreter, seconds each) in
  # VLLM_CACHE_ROOT/modelinfos, one file per class, keyed by the hash of that vLLM's model file: in the one default
  # folder each version of the span (and any other lane on the machine) overwrites the others' entries, so every
  # version relearned every class on every run. One folder per virtualenv keeps each version's entries warm.
  VLLM_CACHE_ROOT="$(dirname "$(dirname "$python")")/vllm_cache" \
    with_bytecode_cache "$python" -m pytest -q -rfEs -m "not gpu" --junitxml="$out/$version/junit.xml" \
    --basetemp="$work/pytest-$version" "$@" || rc=$?
  # What the version gate says this vLLM cannot have (read in that virtualenv), for versions.json.
  "$python" -m portable_spec.vllm_adapter.patch.version_gate > "$out/$version/gate.json"
  if [[ $rc -eq 5 ]]; then log "vLLM $version: pytest collected no tests"; fi
  if [[ $rc -ne 0 ]]; then failed+=("$version (pytest exit $rc)"); fi
}

main_reqs=ci/requirements-cpu.txt
main_python="$(lane_python "$main_reqs")"
export PORTABLE_SPEC_TRITON32_PYTHON="$(bash ci/lanes/triton32_venv.sh "$main_python")"
# Triton 3.2's AMD backend links with ld.lld, which no pip package gives it: Debian's lld package does (the check
# finds it on PATH or under /usr/lib/llvm-*/bin; TRITON_HIP_LLD_PATH names another).
# A fresh CI machine (root, Debian's registry reachable) gets it here, as the lane gets its virtualenvs.
have_lld() { command -v ld.lld >/dev/null || compgen -G '/usr/lib/llvm-*/bin/ld.lld' >/dev/null \
  || [[ -n "${TRITON_HIP_LLD_PATH:-}" ]]; }
if ! have_lld && [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
  log "installing Debian's lld (ld.lld for the Triton 3.2 check's AMD compile)"
  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q lld; } > "$out/apt_lld.log" 2>&1 || true
fi
if ! have_lld; then
  log "the Triton 3.2 check's AMD compile needs ld.lld: apt-get install lld (see $out/apt_lld.log)"; exit 1
fi
# Every ROCm-path Triton kernel compiled for MI300 (gfx942) and MI250 (gfx90a) with this virtualenv's Triton, whose
# AMD backend links in-process; fails when a kernel fails on a target ROCm serves. Report: $out/rocm_compile/.
# It runs in the background beside the Triton 3.2 check: the two are independent (other Pythons, other output
# folders), each compiles in one process on one core, so on a 2-core machine they overlap instead of queueing. Its
# output (rocm_compile.log, rocm_compile.err in $out) reaches the console after the Triton 3.2 check's, as one block:
# its last line when it passes (and what it wrote to stderr), all of it when it fails.
log "ROCm-path Triton kernels compiled for hip:gfx942 and hip:gfx90a (in the background; reported below)"
rocm_start=$SECONDS
with_bytecode_cache "$main_python" -m portable_spec kernels --check-triton --target hip:gfx942 --target hip:gfx90a \
  --out "$out/rocm_compile" > "$out/rocm_compile.log" 2> "$out/rocm_compile.err" &
rocm_pid=$!
log "Triton 3.2 front-end check (proxy for MUSA's Triton: NVIDIA sm_90 and AMD gfx942 backends, static rules)"
start=$SECONDS
triton32_rc=0
with_bytecode_cache "$main_python" -m portable_spec kernels --check-triton --out "$work" \
  --cases portable_spec_harness.synthetic.triton_cases:SYNTHETIC_KERNELS || triton32_rc=$?
log "Triton 3.2 check: $((SECONDS - start)) s"
rocm_rc=0
wait "$rocm_pid" || rocm_rc=$?
cat "$out/rocm_compile.err" >&2
if [[ $rocm_rc -eq 0 ]]; then tail -n 1 "$out/rocm_compile.log"; else cat "$out/rocm_compile.log" >&2; fi
log "ROCm compile step: $((SECONDS - rocm_start)) s (beside the Triton 3.2 check)"
if [[ $triton32_rc -ne 0 || $rocm_rc -ne 0 ]]; then
  log "failed: Triton 3.2 check exit $triton32_rc, ROCm compile step exit $rocm_rc"; exit 1
fi
# shellcheck disable=SC2207  # the span's paths hold no spaces
span_tests=($("$main_python" tests/version_span.py))
# The span's versions, one after the other, beside the main suite: the main suite is one pytest process (a core
# each on a 2-core machine), and the span waited ~7 min for it. Its log is printed once the main suite ends.
log "vLLM version span: ${#span_tests[@]} test modules on each other version, beside the main suite (log follows it)"
(
  for reqs in ci/requirements-cpu-*.txt; do
    run_pytest "$(vllm_of "$reqs")" "$(lane_python "$reqs")" "${span_tests[@]}"
  done
  if [[ ${#failed[@]} -gt 0 ]]; then printf '%s\n' "${failed[@]}" > "$out/span_failed.txt"; exit 1; fi
) > "$out/span.log" 2>&1 &
span_pid=$!
export PORTABLE_SPEC_TRITON32_REPORT="$work/triton32_check.json"  # tests/test_triton_check.py reuses it
# The main suite on a worker per core, at most 4 (each imports vLLM and torch, ~1.5 GB), a test module per worker
# (--dist loadfile: a module's fixtures are built once, as in one process); the span runs beside it.
workers=$(nproc); workers=$(( workers > 4 ? 4 : workers ))
run_pytest "$(vllm_of "$main_reqs")" "$main_python" -n "$workers" --dist loadfile "$@" tests
unset PORTABLE_SPEC_TRITON32_REPORT
span_rc=0
wait "$span_pid" || span_rc=$?
cat "$out/span.log"
if [[ $span_rc -ne 0 ]]; then
  mapfile -t span_failed < <(cat "$out/span_failed.txt" 2>/dev/null || echo "version span (exit $span_rc)")
  failed+=("${span_failed[@]}")
fi

"$main_python" ci/versions_report.py "$out" --span "${span_tests[@]}" > "$out/versions.json"
"$main_python" ci/versions_report.py "$out" --span "${span_tests[@]}" --lines
if [[ ${#failed[@]} -gt 0 ]]; then log "failed: ${failed[*]}"; exit 1; fi
