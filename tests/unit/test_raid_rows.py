"""The RAID sweep's expectation per point and its summary rows, on synthetic samples."""
from types import SimpleNamespace

import pytest

from harness.config import FioJobConfig
from harness.experiments.raid_sweep import Point, RaidSweep, Setup
from harness.report import tables
from harness.samples import Sample


def bw(setup, env, value, point="read-direct"):
    return Sample("bw", value, "KiB/s", {"setup": setup, "env": env, "point": point})


def test_expectation_uses_the_single_member_at_the_same_point_and_env():
    store = SimpleNamespace(samples=[bw("single", "physical", 100.0), bw("single", "virtual", 40.0),
                                     bw("single", "physical", 999.0, point="write-direct")])
    ctx = SimpleNamespace(store=store)
    p = Point("read-direct", FioJobConfig(rw="read"))
    got = {s.metric: s.value for s in RaidSweep()._expectation(ctx, Setup(5, 4, 64), p, "physical", 240.0, {})}
    assert got["expected_bw"] == 300.0                     # RAID 5 read: (N-1) x single
    assert got["measured_expected"] == pytest.approx(0.8)
    assert got["stack_overhead"] == pytest.approx(0.2)
    virt = {s.metric: s.value for s in RaidSweep()._expectation(ctx, Setup(0, 4, 64), p, "virtual", 80.0, {})}
    assert virt["expected_bw"] == 160.0
    assert RaidSweep()._expectation(ctx, Setup(None, 1, 0), p, "physical", 100.0, {}) == []


def test_no_base_means_no_expectation_rather_than_a_guess():
    ctx = SimpleNamespace(store=SimpleNamespace(samples=[]))
    assert RaidSweep()._expectation(ctx, Setup(0, 2, 64), Point("read-direct", FioJobConfig(rw="read")),
                                    "physical", 1.0, {}) == []


def test_rows_pair_pe_and_ve_and_keep_failures():
    meta = {"setup": "raid0-n2-c64k", "point": "read-direct"}
    samples = [Sample("bw", 200.0, "KiB/s", {**meta, "env": "physical"}),
               Sample("stack_overhead", 0.25, "ratio", {**meta, "env": "physical"}),
               Sample("bw", None, "", {**meta, "env": "virtual"}, status="failed", error="boom")]
    (row,) = tables.raid_rows(samples)
    assert row["physical_bw"] == 200.0 and row["physical_stack_overhead"] == 0.25
    assert row["virtual_failed"] and row["errors"] == ["virtual: boom"]
    text = tables.print_raid([row], title="raid-levels", accel="tcg")
    assert "raid0-n2-c64k" in text and "failed" in text and "virtual: boom" in text
