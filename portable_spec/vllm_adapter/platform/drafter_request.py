"""What ``PORTABLE_SPEC_DRAFT_GRAPH`` asks of our drafter graphs, read here only (through ``portable_spec.envs``).

Three places ask, each with its own stakes: the drafter's policy and the config hook under our platform, where unset
means ``full`` and a bad value is one line naming the fix; and the general plugin on any platform, where only an
explicit ``full`` turns our layer on and a bad value must not stop an engine on vLLM's own platform (our policy names
it where our drafter would run).
"""

from __future__ import annotations

from portable_spec.envs import draft_graph
from portable_spec.errors import PortableSpecError


def requested_mode() -> str:
    """The mode where our drafter would run: unset means ``full``; a bad value raises one line."""
    return draft_graph() or "full"


def drafter_graphs_wanted() -> bool:
    """Whether our FULL drafter graphs are asked for under our platform (unset or ``full``). Only then must a capture
    plan hold the drafter's FULL sizes: with ``none`` or ``piecewise`` vLLM's drafter runs, and it needs none."""
    return requested_mode() == "full"


def asked_for_explicitly() -> bool:
    """Whether ``full`` is set explicitly (our drafter on a built-in platform); a bad value counts as not asked."""
    try:
        return draft_graph() == "full"
    except PortableSpecError:
        return False
