# Sourced by the GPU scripts: `tp_flags N` prints the harness CLIs' parallel flags for tensor parallel N: `--tp N`, and
# at N >= 2 the two switches vLLM 0.26.0 needs on a host without NVLink multicast (the lent two-GPU hosts; their
# multicast itself stays off in every engine and server: vllm_door/offline.py's MULTICAST_OFF_ENV).
tp_flags() {
  echo "--tp $1"
  if [[ "$1" -gt 1 ]]; then echo "--disable-custom-all-reduce --no-fuse-allreduce-rms"; fi
}
