#!/usr/bin/env bash
# The musa lane. On a host with torch_musa (a real MUSA device) it runs the probe with --verify and the GPU test
# suite against MUSA. Everywhere else it runs what can honestly run: the declared checks (capability table, capture
# planner with MUSA's live-graph budget, the vLLM MUSA platform/worker at configuration level), the Triton 3.2
# front-end check of every MUSA-path kernel (a proxy for MUSA's Triton; needs vLLM in PYTHON, and builds the
# triton==3.2.0 virtualenv beside it) and, where a CUDA GPU is present, the musa-sim suites; with MUSA_SIM_E2E=1 and
# vLLM in PYTHON also the musa-sim engine lane (real vLLM engines on the MUSA code path, device identity simulated;
# on the project's GPU host it runs as the cuda lane's musa-sim-e2e stage). Results land in OUTDIR/musa_lane.json,
# labelled "musa" or "musa-sim/declared".
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/device_lane.sh" musa "${1:-}"
if "$py" -c "import torch_musa" 2>/dev/null; then
  mode=musa
  "$py" -m portable_spec probe --platform musa --verify --json > "$out/probe_musa.json" || fail=1
  PORTABLE_SPEC_TEST_VLLM_PLATFORM=native PORTABLE_SPEC_TEST_DEVICE=musa "$py" -m pytest -q tests || fail=1
else
  mode="musa-sim/declared"
  "$py" -m portable_spec caps --platform musa --json > "$out/caps_musa.json" || fail=1
  "$py" -m portable_spec sizes --platform musa --method dflash --num-spec 8 --max-num-seqs 8 --json \
    > "$out/sizes_musa_dflash.json" || fail=1
  if "$py" -c "import vllm" 2>/dev/null; then
    t32="$(bash "$root/ci/lanes/triton32_venv.sh" "$py")" && "$py" -m portable_spec kernels --check-triton \
      --cases portable_spec_harness.synthetic.triton_cases:SYNTHETIC_KERNELS \
      --triton32-python "$t32" --out "$out" > "$out/triton32_check.txt" || fail=1
    triton32="ran (triton32_check.json)"
    export PORTABLE_SPEC_TRITON32_REPORT="$out/triton32_check.json"  # the check's tests reuse it
  else
    triton32="not run: $py has no vLLM (set PYTHON to the cpu lane's virtualenv)"
  fi
  "$py" -m pytest -q -m "not gpu" -k "musa" tests || fail=1
  if "$py" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    "$py" -m pytest -q -m gpu -k "musa" tests/gpu || fail=1
    if [[ "${MUSA_SIM_E2E:-0}" == 1 ]] && "$py" -c "import vllm" 2>/dev/null; then
      "$py" ci/gpu/musa_sim_e2e.py "$out/musa_sim" > "$out/musa_sim_e2e.log" 2>&1 || fail=1
    fi
  fi
fi
printf '{"lane": "musa", "mode": "%s", "triton32_check": "%s", "failed": %s}\n' "$mode" "${triton32:-not run: MUSA host}" \
  "$fail" | tee "$out/musa_lane.json"
exit $fail
