#!/usr/bin/env bash
# The cpu lane: builds (or reuses) a virtualenv keyed by the hash of the lane's requirements file and recipe,
# installs torch 2.13.0 (CPU), vLLM 0.26.0's requirements, triton (interpreter only), then vLLM --no-deps, and the
# project (a build where pip prints an "ERROR:" line fails); builds (or reuses) the triton==3.2.0 virtualenv beside it
# (ci/lanes/triton32_venv.sh, keyed by its own hash) and runs the Triton 3.2 front-end check (fails unless every
# MUSA-path kernel passes with substitutes bound), then runs pytest, which reuses the check's report. Works on a fresh
# machine; pytest exit code 5 (no tests collected) is a failure.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
py="${PYTHON:-python3}"
recipe=2  # bump when the install steps below change
key=$( (cat ci/requirements-cpu.txt; echo "recipe $recipe $("$py" -c 'import sys; print(sys.version_info[:2])')") | sha256sum | cut -c1-16)
venv="${PORTABLE_SPEC_VENV:-${PORTABLE_SPEC_VENV_ROOT:-$HOME/.cache/portable_spec/venvs}/cpu-$key}"
log() { printf '[cpu lane] %s\n' "$*"; }
# pip install, quiet; what it prints also goes to $venv/install.log, which the build checks for "ERROR:" lines (pip
# reports dependency conflicts that way and still exits 0).
pip_install() {
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "$@" 2>&1 | tee -a "$venv/install.log"
}

if [[ ! -f "$venv/.complete" ]]; then
  log "building virtualenv $venv"
  rm -rf "$venv"; "$py" -m venv "$venv"
  pip_install --upgrade pip
  # TORCH_INDEX_URL: where a machine without the CPU wheel on disk finds it (e.g. PyTorch's CPU index on GitHub).
  pip_install ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} "$(grep -E '^torch==' ci/requirements-cpu.txt)"
  # vLLM's own requirements, read from its metadata (a dry run: nothing installed), minus torch and the CUDA-built
  # torch companions: its torch pin is for CUDA.
  pip_install --dry-run --no-deps --report "$venv/vllm-report.json" "$(grep -E '^vllm==' ci/requirements-cpu.txt)"
  "$venv/bin/python" - "$venv/vllm-report.json" "$venv/vllm-reqs.txt" <<'PY'
import json, re, sys
skip = {"torch", "torchvision", "torchaudio", "torchcodec"}
(vllm,) = json.load(open(sys.argv[1]))["install"]
out = []
for req in vllm["metadata"].get("requires_dist", []):
    if "extra ==" in req:
        continue
    name = re.split(r"[\s<>=!~;\[(]", req, maxsplit=1)[0].lower()
    if name not in skip:
        out.append(req)
open(sys.argv[2], "w").write("\n".join(out) + "\n")
PY
  echo "$(grep -E '^torch==' ci/requirements-cpu.txt)" > "$venv/constraints.txt"
  pip_install -c "$venv/constraints.txt" -r "$venv/vllm-reqs.txt"
  pip_install -c "$venv/constraints.txt" $(grep -vE '^(#|torch==|vllm==|$)' ci/requirements-cpu.txt)
  # vLLM last and --no-deps: pip checks the installed set for conflicts whenever it resolves dependencies, and vLLM's
  # torch==2.11.0 pin conflicts with the CPU torch on purpose. Installed first, it made the steps installing its
  # requirements print that conflict; now no step after this one resolves dependencies (tests/test_quiet_lane.py).
  pip_install --no-deps "$(grep -E '^vllm==' ci/requirements-cpu.txt)"
  if grep -n '^ERROR:' "$venv/install.log"; then
    log "pip reported the errors above while building $venv: failing the lane (the next run rebuilds)"; exit 1
  fi
  touch "$venv/.complete"
else
  log "reusing virtualenv $venv"
fi

# --check-build-dependencies: without build isolation pip would build with whatever setuptools the venv has; pyproject's
# SPDX license string needs setuptools>=77 (torch's own requirement brings it).
"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation \
  --check-build-dependencies -e "$root"
export PYTHONDONTWRITEBYTECODE=1
export PORTABLE_SPEC_TRITON32_PYTHON="$(bash ci/lanes/triton32_venv.sh "$venv/bin/python")"
check_out="$(mktemp -d)"; trap 'rm -rf "$check_out"' EXIT
log "Triton 3.2 front-end check (proxy for MUSA's Triton)"
"$venv/bin/python" -m portable_spec kernels --check-triton --out "$check_out"
export PORTABLE_SPEC_TRITON32_REPORT="$check_out/triton32_check.json"  # tests/test_triton_check.py reuses it
export TRITON_INTERPRET=1
# tests/test_cpu_install.py resolves the README's install lines against this machine image's CPU wheel and PyPI
# mirrors (/opt/wheels, /opt/pypi*): the lane expects them, so the test fails rather than skips where they are missing.
# A runner outside the image (GitHub's, .github/workflows/cpu.yml) says "optional".
export PORTABLE_SPEC_CPU_INSTALL_MIRRORS="${PORTABLE_SPEC_CPU_INSTALL_MIRRORS:-required}"
log "torch $("$venv/bin/python" -c 'import torch; print(torch.__version__)')"
set +e
"$venv/bin/python" -m pytest -q -m "not gpu" "$@" tests
rc=$?
set -e
if [[ $rc -eq 5 ]]; then log "pytest collected no tests: failing the lane"; exit 1; fi
exit $rc
