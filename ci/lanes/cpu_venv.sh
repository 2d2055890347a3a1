#!/usr/bin/env bash
# Builds (or reuses) one cpu-lane virtualenv and prints its interpreter on stdout (progress goes to stderr).
# Usage: ci/lanes/cpu_venv.sh REQUIREMENTS   (ci/requirements-cpu.txt, or one of the version span's
#        ci/requirements-cpu-<vllm version>.txt)
# The virtualenv is keyed by the hash of the requirements file, this script's recipe number and the Python version,
# so each vLLM version of the span has its own, reused until one of them changes. It installs the requirements' torch
# (the CPU wheel), vLLM's requirements minus those that serve only CUDA (ci/vllm_cpu_requirements.py), the file's
# other lines, then vLLM --no-deps (a build where pip prints an "ERROR:" line, or where a CUDA-only distribution got
# in anyway, fails). The project itself is installed by the lane (editable), not here.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
reqs="${1:?usage: ci/lanes/cpu_venv.sh REQUIREMENTS}"
py="${PYTHON:-python3}"
# Bump when the install steps below (or ci/vllm_cpu_requirements.py's or ci/cpu_venv_slim.py's lists) change.
# 3: vLLM's CUDA-only requirements left out (issue 36). 4: no bytecode compiled at install (the lane caches what the
# tests import, ci/lanes/cpu.sh) and the binaries no CPU host can load removed (ci/cpu_venv_slim.py).
recipe=4
key=$( (cat "$reqs"; echo "recipe $recipe $("$py" -c 'import sys; print(sys.version_info[:2])')") | sha256sum | cut -c1-16)
# PORTABLE_SPEC_VENV: one fixed path, for the main requirements only (a span version always gets its keyed folder).
if [[ "$(basename "$reqs")" == requirements-cpu.txt && -n "${PORTABLE_SPEC_VENV:-}" ]]; then
  venv="$PORTABLE_SPEC_VENV"
else
  venv="${PORTABLE_SPEC_VENV_ROOT:-$HOME/.cache/portable_spec/venvs}/cpu-$key"
fi
log() { printf '[cpu venv] %s\n' "$*" >&2; }
# pip install, quiet; what it prints goes to $venv/install.log only, which the build checks for "ERROR:" lines (pip
# reports dependency conflicts that way and still exits 0) and prints them; a machine's pip configuration makes pip
# warn at every step (e.g. "Location ... is ignored"), advice a green log should not carry. A failing step prints the
# log's tail and fails the build.
# --no-compile: pip would write bytecode for every module of every package (~340 MB, vLLM's and transformers' model
# zoos mostly); the lane has Python cache the bytecode of what the tests import, outside the virtualenv.
pip_install() {
  if ! "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-compile "$@" >>"$venv/install.log" 2>&1
  then
    tail -n 30 "$venv/install.log" >&2
    log "pip install $* failed (above; all of it in $venv/install.log)"; exit 1
  fi
}
torch_pin="$(grep -E '^torch==' "$reqs")"
vllm_pin="$(grep -E '^vllm==' "$reqs")"

if [[ ! -f "$venv/.complete" ]]; then
  log "building $venv ($vllm_pin, $torch_pin)"
  rm -rf "$venv"; "$py" -m venv "$venv"
  pip_install --upgrade pip
  # TORCH_INDEX_URL: where a machine without the CPU wheel on disk finds it (e.g. PyTorch's CPU index on GitHub).
  pip_install ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} "$torch_pin"
  # vLLM's own requirements, read from its metadata (a dry run: nothing installed), minus torch and the CUDA-built
  # torch companions (its torch pin is for CUDA) and minus what serves only CUDA (ci/vllm_cpu_requirements.py: the
  # curated list, issue 36; what it dropped goes to $venv/skipped.txt).
  pip_install --dry-run --no-deps --report "$venv/vllm-report.json" "$vllm_pin"
  "$venv/bin/python" "$root/ci/vllm_cpu_requirements.py" "$venv/vllm-report.json" "$venv/vllm-reqs.txt" \
    "$venv/skipped.txt"
  echo "$torch_pin" > "$venv/constraints.txt"
  pip_install -c "$venv/constraints.txt" -r "$venv/vllm-reqs.txt"
  pip_install -c "$venv/constraints.txt" $(grep -vE '^(#|torch==|vllm==|$)' "$reqs")
  # vLLM last and --no-deps: pip checks the installed set for conflicts whenever it resolves dependencies, and vLLM's
  # CUDA torch pin conflicts with the CPU torch on purpose. Installed first, it made the steps installing its
  # requirements print that conflict; now no step after this one resolves dependencies (tests/test_quiet_lane.py).
  pip_install --no-deps "$vllm_pin"
  # A kept requirement that brings in a CUDA-only distribution prints an "ERROR:" line into the log checked below.
  "$venv/bin/python" "$root/ci/vllm_cpu_requirements.py" --check-installed 2>&1 | tee -a "$venv/install.log" >&2 \
    || true
  if grep -n '^ERROR:' "$venv/install.log" >&2; then
    log "pip reported the errors above while building $venv: failing the lane (the next run rebuilds)"; exit 1
  fi
  # vLLM's CUDA extensions (~570 MB) and Triton's CUPTI cannot load on a CPU host: removed, each named in
  # $venv/slimmed.txt.
  "$venv/bin/python" "$root/ci/cpu_venv_slim.py" "$venv" 2>> "$venv/install.log"
  cp "$reqs" "$venv/lane-requirements.txt"  # which file built it, for a person looking at the cache
  touch "$venv/.complete"
  # One virtualenv per vLLM version: one an older recipe or requirements file built for this vLLM goes (3 GB each).
  for old in "$(dirname "$venv")"/cpu-*/lane-requirements.txt; do
    if [[ "$(dirname "$old")" != "$venv" ]] && grep -qxF "$vllm_pin" "$old"; then
      log "removing $(dirname "$old"), an older virtualenv for $vllm_pin"; rm -rf "$(dirname "$old")"
    fi
  done
else
  log "reusing $venv ($vllm_pin)"
fi
echo "$venv/bin/python"
