#!/usr/bin/env bash
# The rocm lane. On any host it first compiles every Triton kernel of the ROCm path for gfx942 and gfx90a (and sm_90
# for comparison) with the installed Triton, whose AMD backend links in-process (no GPU, no ROCm needed): the report
# goes to OUTDIR/rocm_compile/, and a kernel that fails on a target ROCm serves fails the lane. A compile proves the
# kernel gets through Triton's AMD passes and code generation to a loadable code object; nothing at run time.
# Then, on a ROCm host (torch.version.hip set and a device visible) it runs the probe with --verify and the GPU suites
# (HIP is reached through torch.cuda). Everywhere else it runs the declared checks only: capability table, fp8 dtype
# rule for gfx94x, capture planner. Results land in OUTDIR/rocm_lane.json, labelled "rocm" or "declared", with
# whether the compile step passed.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/device_lane.sh" rocm "${1:-}"
compiled=1; mkdir -p "$out/rocm_compile"
"$py" -m portable_spec kernels --check-triton --target hip:gfx942 --target hip:gfx90a --target cuda:90 \
  --out "$out/rocm_compile" > "$out/rocm_compile/summary.txt" || { compiled=0; fail=1; }
if "$py" -c "import torch, sys; sys.exit(0 if torch.version.hip and torch.cuda.is_available() else 1)"; then
  mode=rocm
  "$py" -m portable_spec probe --platform rocm --verify --json > "$out/probe_rocm.json" || fail=1
  PORTABLE_SPEC_TEST_VLLM_PLATFORM=native "$py" -m pytest -q -m gpu tests/gpu || fail=1
else
  mode=declared
  "$py" -m portable_spec caps --platform rocm --json > "$out/caps_rocm.json" || fail=1
  "$py" -m portable_spec sizes --platform rocm --method eagle --num-spec 3 --max-num-seqs 64 --json \
    > "$out/sizes_rocm_eagle.json" || fail=1
  "$py" -m pytest -q -m "not gpu" -k "rocm" tests || fail=1
fi
printf '{"lane": "rocm", "mode": "%s", "compiled_for_amd": %s, "failed": %s}\n' "$mode" "$compiled" "$fail" \
  | tee "$out/rocm_lane.json"
exit $fail
