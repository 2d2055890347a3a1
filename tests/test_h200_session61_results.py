"""Session 61's results README (one H200, vLLM 0.26.0, the V1 runner) read back from its JSON and logs: the
first-batches probe on our server with the Triton folder fix and without it (a compiling and a loading boot), and on
upstream V1, each wave's numbers, pauses and compiles after boot, which boot compiled, and what the control ran."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from results_readback import first_batches_report, load, wave_cells, wave_pairs

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "bench" / "results" / "2026-12-04-h200-session61"
FB = RUN / "first-batches"
# folder -> (README row's server, boot, tree_changes)
CALLS = {
    "fix-compiling": ("ours, the fix", "compiling", 0),
    "prefix-compiling": ("ours, before the fix", "compiling", 3),
    "prefix-loading": ("ours, before the fix", "loading", 3),
    "upstream-compiling": ("upstream V1", "compiling", 0),
}
UPSTREAM_COMPILES = ["_compute_slot_mapping_kernel", "eagle_prepare_next_token_padded_kernel",
                     "eagle_step_slot_mapping_metadata_kernel", "eagle_prepare_inputs_padded_kernel",
                     "_topk_topp_kernel"]


def variant_of(folder: str) -> dict:
    report = first_batches_report(FB / folder)
    (variant,) = report["variants"]
    assert variant["facts"]["runner_kind"] == "v1", folder
    return variant


def server_log(folder: str) -> str:
    (log,) = (FB / folder / "first-batches").glob("server_*.log.gz")
    return gzip.decompress(log.read_bytes()).decode()


def readme_row(folder: str) -> str:
    server, boot, _ = CALLS[folder]
    variant = variant_of(folder)
    return f"| {server} | {boot} | {wave_cells(wave_pairs(variant), {p['size'] for p in variant['pauses']})} |"


@pytest.mark.parametrize("folder", sorted(CALLS))
def test_every_call_ran_vllm_0_26_0_on_the_v1_runner_with_the_tree_the_readme_names(folder):
    lane = load(FB / folder / "cuda_lane.json")
    assert (lane["commit"][:7], lane["vllm"], lane["tree_changes"]) == ("ae1de10", "0.26.0", CALLS[folder][2])
    assert lane["device"] == "NVIDIA H200"
    assert readme_row(folder) in (RUN / "README.md").read_text()


@pytest.mark.parametrize("folder", ["fix-compiling", "prefix-compiling", "prefix-loading"])
def test_ours_paused_nowhere_and_compiled_nothing_after_boot_with_the_fix_or_without_it(folder):
    report = first_batches_report(FB / folder)
    variant = variant_of(folder)
    assert variant["variant"] == "ours" and report["compared_waves"] == 12 and report["problems"] == []
    assert variant["pauses"] == [] and variant["jit_after_boot"] == [] and variant["jit_monitor_active"]
    assert sorted(wave_pairs(variant)) == [1, 2, 4, 8, 16, 32]


def test_the_largest_excess_of_a_first_wave_over_its_repeat_is_the_readmes():
    excess = {(folder, size): round(a - b, 1) for folder in ("fix-compiling", "prefix-compiling", "prefix-loading")
              for size, (a, b) in wave_pairs(variant_of(folder)).items()}
    (folder, size), largest = max(excess.items(), key=lambda item: item[1])
    assert (folder, size, largest) == ("fix-compiling", 1, 63.2)
    assert "the largest excess 63.2 ms, the fix's batch of one" in " ".join((RUN / "README.md").read_text().split())


def test_which_boots_compiled_the_model_is_read_from_their_logs():
    for folder, (_, boot, _) in CALLS.items():
        log = server_log(folder)
        compiled, loaded = log.count("Compiling a graph"), log.count("Directly load the compiled graph")
        assert (compiled, loaded) == ((2, 0) if boot == "compiling" else (0, 2)), folder
    for folder in ("fix-compiling", "prefix-compiling"):
        assert "Triton builds: 14 compiled, 0 from the disk cache" in server_log(folder)


def test_the_control_ran_the_worker_code_from_before_the_fix():
    patch = gzip.decompress((FB / "prefix.patch.gz").read_bytes()).decode()
    assert "+from portable_spec.vllm_adapter.worker.triton_cache import triton_cache_as" in patch
    assert "-        serve_in_start_folder(self.triton_cache_at_start)" in patch
    assert "+        with triton_cache_as(self.triton_cache_at_start):" in patch
    assert sorted(line[6:] for line in patch.splitlines() if line.startswith("+++ b/")) == [
        "portable_spec/vllm_adapter/worker/mrv2_warmup.py", "portable_spec/vllm_adapter/worker/triton_cache.py",
        "portable_spec/vllm_adapter/worker/v1_model_runner.py"]
    for folder in ("prefix-compiling", "prefix-loading"):
        assert load(FB / folder / "cuda_lane.json")["tree_changes"] == 3


def test_upstream_v1_paused_where_it_compiled_after_boot():
    variant = variant_of("upstream-compiling")
    assert sorted(p["size"] for p in variant["pauses"]) == [1, 2, 4, 16]
    assert [line.rsplit(": ", 1)[1] for line in variant["jit_after_boot"]] == UPSTREAM_COMPILES
    text = " ".join((RUN / "README.md").read_text().split())
    assert "its monitor logged 5 kernels compiled during inference (" + ", ".join(
        f"`{name}`" for name in UPSTREAM_COMPILES) + ")" in text


def test_the_main_readme_says_the_v1_runner_showed_no_pause_before_or_after_the_fix():
    text = " ".join((ROOT / "README.md").read_text().split())
    assert ("On vLLM 0.26.0's V1 runner our server showed no such pause on a compiling boot, with the fix or without "
            "it") in text
    assert "bench/results/2026-12-04-h200-session61/README.md" in text
