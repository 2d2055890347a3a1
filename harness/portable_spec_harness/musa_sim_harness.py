"""The musa-sim harness: the draft runner on the MUSA platform class, backed by a simulated ``torch.musa``.

``SimulatedMusa`` (``portable_spec_harness.musa_sim``) records every device call and enforces the MUSA rules we know
(MUSAGraph takes no ``keep_graph``; capture under ``inference_mode``; the live-executable cap). It is injected into
``MusaPort``; no fake ``torch_musa`` is installed. Everything here proves "musa-sim", never "runs on MUSA".
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch

from portable_spec.draft.runner import live_graphs
from portable_spec_harness.synthetic.proposer import SyntheticProposer
from portable_spec.ports.musa_port import MusaPort
from portable_spec_harness.musa_sim import LABEL, SimulatedMusa


def musa_sim_platform(live_graph_cap: int | None = None) -> MusaPort:
    """A ``MusaPort`` over a fresh ``SimulatedMusa``. With a cap, the platform's live-graph budget is the cap
    (an instance override of the class budget), so the runner must stay under it without being stopped by it."""
    port = MusaPort(device_module=SimulatedMusa(live_graph_cap=live_graph_cap), label=LABEL)
    if live_graph_cap is not None:
        port.live_graph_limit = live_graph_cap
    return port


def sim_tensor_device() -> torch.device:
    """Where musa-sim tensors live: the CUDA device backing the simulation (``torch.device('musa')`` does not exist
    in a CUDA build, so ``MusaPort.device()`` cannot be used under musa-sim)."""
    return torch.device("cuda", torch.cuda.current_device())


def musa_sim_evidence(runner: SyntheticProposer) -> dict[str, Any]:
    """What the simulation recorded: graph objects, captures, replays, pool handles, and the MUSA rules kept."""
    sim = runner.platform.device_module
    if not isinstance(sim, SimulatedMusa):
        raise TypeError("musa_sim_evidence needs a runner on a musa-sim platform")
    counts: Counter = sim.call_counts()
    pools = runner.pool_ids()
    return {
        "label": LABEL,
        "calls": {name: counts[name] for name in ("MUSAGraph", "graph", "MUSAGraph.replay", "graph_pool_handle",
                                                  "Stream", "stream", "Event", "synchronize") if counts[name]},
        # The simulation raises on each violation, so reaching here with captures means they were respected:
        "keep_graph_passed": False,
        "inference_mode_capture": counts["graph"] > 0,
        "pool_handles_created": counts["graph_pool_handle"],
        "one_shared_pool": len(pools) <= 1 and (not pools or pools == {runner.platform.graph_pool()}),
        "live_graphs_sim": sim.live_graphs,
        "live_graph_cap": sim.live_graph_cap,
        "live_graphs_runner": live_graphs(runner.platform),
        "cap_respected": sim.live_graph_cap is None or sim.live_graphs <= sim.live_graph_cap,
    }
