#!/usr/bin/env bash
# The cuda lane's tp2 stage (see ci/lanes/cuda.sh): tensor parallel 2 on a host with 2+ GPUs.
#   TP2_STEPS=matrix,boot,bench (default; also serve, soak)   TP2_PARTS=tp2 (tp2_ctx: issue 37's parts)
#   TP2_BENCH_PAIRS=perfect,partial   TP2_BENCH_REPEATS=3   E2E_PARALLEL=6
#   serve: ci/gpu/serve_bench.sh at SERVE_BENCH_TP (default 2) with its SERVE_BENCH_* knobs, into OUTDIR/tp2/
#   soak:  ci/gpu/soak.sh at SOAK_TP (default 2), SOAK_PAIRS (default llama_ctx_eagle3), SOAK_SYNC_PAIRS (default
#          none), into OUTDIR/tp2/
set -uo pipefail
out="$1"; py="${PYTHON:-python3}"
here="$(dirname "${BASH_SOURCE[0]}")"
source "$here/tp_flags.sh"
gpus=$("$py" -c "import torch; print(torch.cuda.device_count())" 2>/dev/null || echo 0)
if [[ "$gpus" -lt 2 ]]; then echo "tp2: skipped: $gpus GPU(s) visible, tensor parallel 2 needs 2"; exit 0; fi
# NVLink multicast stays off on hosts that share GPUs (every engine and server also gets this from the harness's
# isolation environment); vLLM 0.26.0 at TP>=2 there also needs the two switches of tp_flags.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
read -ra host <<< "$(tp_flags 2 | tr '\n' ' ')"
fail=0
steps="${TP2_STEPS:-matrix,boot,bench}"; pairs="${TP2_BENCH_PAIRS:-perfect,partial}"
for step in ${steps//,/ }; do
  echo "=== tp2: $step ==="
  case "$step" in
    matrix) "$py" ci/gpu/v1_drafter_matrix.py "$out/tp2-matrix" --parts "${TP2_PARTS:-tp2}" \
              --parallel "${E2E_PARALLEL:-6}" --concurrent-variants 2>&1 | tee "$out/tp2_matrix.log" ;;
    boot)   "$py" -m portable_spec_harness.e2e.boot_time "$out/tp2-boot" "${host[@]}" ${BOOT_WARM:+--warm} \
              2>&1 | tee "$out/tp2_boot.log" ;;
    bench)  for variant in ${pairs//,/ }; do
              "$py" -m portable_spec bench e2e --out "$out/tp2-bench-$variant" --model-variant "$variant" \
                --variants "${TP2_BENCH_VARIANTS:-upstream_v1,full_drafter}" --repeats "${TP2_BENCH_REPEATS:-3}" \
                --timeout "${BENCH_BOOT_TIMEOUT:-420}" "${host[@]}" 2>&1 | tee "$out/tp2_bench_$variant.log"
              [[ ${PIPESTATUS[0]} -eq 0 ]] || fail=1
            done; continue ;;
    serve)  SERVE_BENCH_TP="${SERVE_BENCH_TP:-2}" bash "$here/serve_bench.sh" "$out/tp2" || fail=1; continue ;;
    soak)   SOAK_TP="${SOAK_TP:-2}" SOAK_PAIRS="${SOAK_PAIRS:-llama_ctx_eagle3}" SOAK_SYNC_PAIRS="${SOAK_SYNC_PAIRS-}" \
              bash "$here/soak.sh" "$out/tp2" || fail=1; continue ;;
    *) echo "tp2: unknown step $step"; fail=1; continue ;;
  esac
  [[ ${PIPESTATUS[0]} -eq 0 ]] || fail=1
done
exit $fail
