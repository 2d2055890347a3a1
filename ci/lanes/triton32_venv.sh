#!/usr/bin/env bash
# Builds (or reuses) the virtualenv of the Triton 3.2 front-end check and prints its interpreter on stdout.
# Usage: ci/lanes/triton32_venv.sh MAIN_PYTHON   (an interpreter with torch and vLLM, e.g. the cpu lane's virtualenv)
# triton==3.2.0 (ci/requirements-triton32.txt, about 0.7 GB) is installed ONCE, into a plain folder keyed by the
# requirements, this script's recipe number and the Python version, and shared: each MAIN_PYTHON (one per vLLM
# version of the span) gets a virtualenv of a few kilobytes whose two .pth files put that folder first and
# MAIN_PYTHON's site-packages after it, so triton 3.2.0 shadows the main Triton while torch and vLLM come from there.
# The small virtualenv is keyed by the same plus MAIN_PYTHON's site-packages.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
main="${1:?usage: ci/lanes/triton32_venv.sh MAIN_PYTHON (an interpreter with torch and vLLM)}"
recipe=2  # bump when the steps below change
log() { printf '[triton32 venv] %s\n' "$*" >&2; }
main_site=$("$main" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
pyver=$("$main" -c 'import sys; print(sys.version_info[:2])')
venvs="${PORTABLE_SPEC_VENV_ROOT:-$HOME/.cache/portable_spec/venvs}"
shared_key=$( (cat "$root/ci/requirements-triton32.txt"; echo "recipe $recipe $pyver") | sha256sum | cut -c1-16)
shared="$venvs/triton32-site-$shared_key"
key=$( (cat "$root/ci/requirements-triton32.txt"; echo "recipe $recipe $pyver $main_site") | sha256sum | cut -c1-16)
venv="$venvs/triton32-$key"
mkdir -p "$venvs"

# What pip and the checks print goes to an install log only (a host's pip configuration may warn about its own index;
# vLLM's import logs its plugins): the console sees it only when a step fails.
failed() { tail -n 30 "$2" >&2; log "$1 failed (above; all of it in $2)"; exit 1; }

# The shared Triton 3.2 install, under a lock: two lanes (or two versions of the span) may ask at once.
exec 9>"$shared.lock"
flock 9
if [[ ! -f "$shared/.complete" ]]; then
  log "installing triton 3.2.0 into $shared (shared by every vLLM version's check)"
  rm -rf "$shared"; mkdir -p "$shared"
  "$main" -m pip install -q --disable-pip-version-check --no-deps --target "$shared" \
    -r "$root/ci/requirements-triton32.txt" >>"$shared/.install.log" 2>&1 \
    || failed "pip install --target -r ci/requirements-triton32.txt" "$shared/.install.log"
  touch "$shared/.complete"
fi
flock -u 9

if [[ ! -f "$venv/.complete" ]]; then
  log "building $venv (sees $shared, then $main_site)"
  rm -rf "$venv"; "$main" -m venv --without-pip "$venv"
  own_site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  # .pth files run in name order and each appends: "aa" puts the shared Triton 3.2 before "zz"'s main site-packages.
  echo "$shared" > "$own_site/aa-portable-spec-triton32.pth"
  echo "import site; site.addsitedir('$main_site')" > "$own_site/zz-portable-spec-main-site.pth"
  "$venv/bin/python" - "$shared" >>"$venv/install.log" 2>&1 <<'PY' || failed "the check that triton 3.2.0 shadows the main Triton" "$venv/install.log"
import sys
shared = sys.argv[1]
import triton
assert triton.__version__ == "3.2.0" and triton.__file__.startswith(shared), (triton.__version__, triton.__file__)
import torch, vllm  # noqa: E401 - both from the main site-packages
assert not torch.__file__.startswith(shared) and not vllm.__file__.startswith(shared)
PY
  touch "$venv/.complete"
else
  log "reusing $venv"
fi
echo "$venv/bin/python"
