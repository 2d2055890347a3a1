"""The graph-gap probe's command line (``e2e/graph_gap_probe.py``): bad input and a host without CUDA are one line
and exit 2. What it measures is ``step_attribution.device_gaps`` (``test_step_breakdown.py``) on a GPU run."""

from __future__ import annotations

import json

import pytest

from portable_spec_harness.e2e import graph_gap_probe


@pytest.mark.parametrize("argv,fragment", [(["--kernels", "0"], ">= 1"), (["--steps", "-1"], ">= 1")])
def test_bad_counts_are_one_line_and_exit_2(tmp_path, capsys, argv, fragment):
    assert graph_gap_probe.main(["--out", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and fragment in err[0]
    assert not (tmp_path / "graph_gap_probe.json").exists()


def test_without_cuda_it_says_where_to_run_and_exits_2(tmp_path, capsys, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert graph_gap_probe.main(["--out", str(tmp_path), "--json"]) == 2
    payload = json.loads(capsys.readouterr().out)
    assert payload["exit"] == 2 and "GPU host" in payload["error"]
    assert not (tmp_path / "graph_gap_probe.json").exists()
