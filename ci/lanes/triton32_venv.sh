#!/usr/bin/env bash
# Builds (or reuses) the virtualenv of the Triton 3.2 front-end check and prints its interpreter on stdout.
# Usage: ci/lanes/triton32_venv.sh MAIN_PYTHON   (an interpreter with torch and vLLM, e.g. the cpu lane's virtualenv)
# Its own site-packages holds only ci/requirements-triton32.txt (triton==3.2.0); a .pth file, processed after its own
# site-packages, adds MAIN_PYTHON's, so triton 3.2.0 shadows the main Triton while torch and vLLM come from there.
# Keyed by the requirements file, this script's recipe number, MAIN_PYTHON's site-packages and Python version.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
main="${1:?usage: ci/lanes/triton32_venv.sh MAIN_PYTHON (an interpreter with torch and vLLM)}"
recipe=1  # bump when the steps below change
log() { printf '[triton32 venv] %s\n' "$*" >&2; }
failed() { tail -n 30 "$venv/install.log" >&2; log "$1 failed (above; all of it in $venv/install.log)"; exit 1; }
main_site=$("$main" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
pyver=$("$main" -c 'import sys; print(sys.version_info[:2])')
key=$( (cat "$root/ci/requirements-triton32.txt"; echo "recipe $recipe $pyver $main_site") | sha256sum | cut -c1-16)
venv="${PORTABLE_SPEC_VENV_ROOT:-$HOME/.cache/portable_spec/venvs}/triton32-$key"

if [[ ! -f "$venv/.complete" ]]; then
  log "building $venv (sees $main_site)"
  rm -rf "$venv"; "$main" -m venv "$venv"
  # What pip and the check below print goes to $venv/install.log only (a host's pip configuration may warn about
  # its own index; vLLM's import logs its plugins): the console sees it only when a step fails.
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps -r "$root/ci/requirements-triton32.txt" \
    >>"$venv/install.log" 2>&1 || failed "pip install -r ci/requirements-triton32.txt"
  own_site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  # "zz": .pth files run in name order; addsitedir appends, so the main site-packages comes after our own.
  echo "import site; site.addsitedir('$main_site')" > "$own_site/zz-portable-spec-main-site.pth"
  "$venv/bin/python" - "$own_site" >>"$venv/install.log" 2>&1 <<'PY' || failed "the check that triton 3.2.0 shadows the main Triton"
import sys
own = sys.argv[1]
import triton
assert triton.__version__ == "3.2.0" and triton.__file__.startswith(own), (triton.__version__, triton.__file__)
import torch, vllm  # noqa: E401 - both from the main site-packages
assert not torch.__file__.startswith(own) and not vllm.__file__.startswith(own)
PY
  touch "$venv/.complete"
else
  log "reusing $venv"
fi
echo "$venv/bin/python"
