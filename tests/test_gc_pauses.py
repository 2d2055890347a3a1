"""The bench child's collector hygiene (gc_pauses.py): a frozen heap leaves the boot's objects out of every later
collection, and the per-pass clock counts exactly the collections inside it. Timing a real engine is the cuda
lane's job; these pin the mechanism the bench's numbers rest on."""

from __future__ import annotations

import gc

import pytest

from portable_spec_harness.e2e.child import bench_summary, parse_args
from portable_spec_harness.e2e.gc_pauses import CollectionClock, settle_heap


@pytest.fixture
def unfrozen_after():
    yield
    gc.unfreeze()


def test_a_frozen_heap_leaves_the_boots_objects_out_of_a_full_collection(unfrozen_after):
    boot_objects = [[i] for i in range(50_000)]  # stands in for the booted engine's heap
    gc.collect()
    live = len(gc.get_objects(generation=2))
    assert live >= 50_000
    facts = settle_heap("frozen")
    assert facts["gc_heap"] == "frozen" and facts["frozen_objects"] >= 50_000
    # what a later full collection still traverses: not the frozen boot objects
    assert len(gc.get_objects(generation=2)) < live - 50_000 + 1_000
    del boot_objects


def test_a_live_heap_is_left_as_it_is(unfrozen_after):
    before = gc.get_freeze_count()
    assert settle_heap("live") == {"gc_heap": "live", "frozen_objects": 0}
    assert gc.get_freeze_count() == before


def test_an_unknown_heap_mode_names_the_choices():
    with pytest.raises(ValueError, match="frozen, live"):
        settle_heap("thawed")


def test_the_clock_counts_only_the_collections_inside_it():
    gc.collect()  # outside: not counted
    with CollectionClock() as clock:
        gc.collect(0)
        gc.collect(2)
        gc.collect(2)
    gc.collect()
    assert clock.counts == [1, 0, 2]
    report = clock.report()
    assert report["gc_collections"] == [1, 0, 2] and report["gc_pause_ms"] > 0
    assert clock._callback not in gc.callbacks


def test_the_clock_is_removed_when_the_pass_raises():
    with pytest.raises(RuntimeError):
        with CollectionClock() as clock:
            raise RuntimeError("the engine failed mid-pass")
    assert clock._callback not in gc.callbacks


def test_the_summary_carries_each_passs_pause_and_the_full_collections():
    passes = [{"wall_s": 0.4, "output_tokens": 10, "drafts": 2, "accepted": 4, "gc_pause_ms": 0.5,
               "gc_collections": [3, 0, 0]},
              {"wall_s": 0.6, "output_tokens": 10, "drafts": 2, "accepted": 4, "gc_pause_ms": 180.0,
               "gc_collections": [3, 1, 1]}]
    summary = bench_summary(1, 0.01, passes, bench_tokens=10)
    assert summary["gc_pause_ms_all"] == [0.5, 180.0] and summary["gc_full_collections"] == 1
    assert "started_at_all" not in summary
    older = bench_summary(1, 0.01, [{k: v for k, v in p.items() if not k.startswith("gc_")} for p in passes], 10)
    assert "gc_pause_ms_all" not in older and "gc_full_collections" not in older


def test_the_child_freezes_by_default_and_accepts_live():
    base = ["--variant", "mrv2", "--target", "t", "--serve"]
    assert parse_args(base).gc_heap == "frozen"
    assert parse_args([*base, "--gc-heap", "live"]).gc_heap == "live"
    with pytest.raises(SystemExit) as exit_:
        parse_args([*base, "--gc-heap", "thawed"])
    assert exit_.value.code == 2
