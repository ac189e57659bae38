"""The RAID sweep's expectation per point and its summary rows, on synthetic samples."""
from types import SimpleNamespace

import pytest

from harness.experiments import raid_sweep
from harness.experiments.raid_sweep import RaidSweep, Setup
from harness.results.samples import Sample


class FakePipeline:
    """The two things the expectation reads from the pipeline: repeat values and derived metadata."""
    def __init__(self, values: dict[str, list[float]]):
        self._values = values

    def values(self, point_id, metric):
        return self._values.get(point_id, [])

    def derived_meta(self, mp):
        return {"point_id": mp.id}


def block(setup: Setup, env: str, rw: str = "read"):
    return [SimpleNamespace(id=f"{setup.label}/{rw}-direct/{env}", env=env, meta={"point": f"{rw}-direct", "rw": rw})]


def expectations(pipeline, setup, env):
    store = SimpleNamespace(samples=[])
    store.add = store.samples.extend
    RaidSweep().expectations(SimpleNamespace(store=store), pipeline, setup, block(setup, env))
    return {s.metric: s.value for s in store.samples}


def test_expectation_uses_the_single_member_at_the_same_point_and_env():
    raid5, raid0 = Setup(5, 4, 64), Setup(0, 4, 64)
    pipe = FakePipeline({"single/read-direct/physical": [100.0, 100.0], "single/read-direct/virtual": [40.0],
                         "single/write-direct/physical": [999.0], f"{raid5.label}/read-direct/physical": [240.0],
                         f"{raid0.label}/read-direct/virtual": [80.0]})
    got = expectations(pipe, raid5, "physical")
    assert got["expected_bw"] == 300.0                     # RAID 5 read: (N-1) x single
    assert got["measured_expected"] == pytest.approx(0.8)
    assert got["stack_overhead"] == pytest.approx(0.2)
    assert expectations(pipe, raid0, "virtual")["expected_bw"] == 160.0
    assert expectations(pipe, Setup(None, 1, 0), "physical") == {}


def test_no_base_means_no_expectation_rather_than_a_guess():
    setup = Setup(0, 2, 64)
    assert expectations(FakePipeline({f"{setup.label}/read-direct/physical": [1.0]}), setup, "physical") == {}


def test_rows_pair_pe_and_ve_and_keep_failures():
    meta = {"setup": "raid0-n2-c64k", "point": "read-direct"}
    samples = [Sample("bw", 200.0, "KiB/s", {**meta, "env": "physical"}),
               Sample("stack_overhead", 0.25, "ratio", {**meta, "env": "physical"}),
               Sample("bw", None, "", {**meta, "env": "virtual"}, status="failed", error="boom")]
    (row,) = raid_sweep.raid_rows(samples)
    assert row["physical_bw"] == 200.0 and row["physical_stack_overhead"] == 0.25
    assert row["virtual_failed"] and row["errors"] == ["virtual: boom"]
    text = raid_sweep.print_raid([row], title="raid-levels", accel="tcg")
    assert "raid0-n2-c64k" in text and "failed" in text and "virtual: boom" in text


def test_f2fs_over_ext4_per_level_and_env_with_its_test():
    from harness.experiments.filesystems import f2fs_over_ext4
    def row(setup, fs, pe, ve):
        return {"setup": setup, "point": f"{fs}-randwrite-buffered", "physical_bw": sum(pe) / len(pe),
                "physical_bw#values": pe, "virtual_bw": sum(ve) / len(ve), "virtual_bw#values": ve}
    rows = [row("single", "ext4", [100, 101, 99, 100], [50, 51, 49, 50]),
            row("single", "f2fs", [200, 201, 199, 200], [51, 50, 49, 50]),
            row("raid5-n4-c512k", "ext4", [10, 11, 9], [5]), row("raid5-n4-c512k", "f2fs", [500, 510, 490], [250])]
    lines = f2fs_over_ext4(rows)
    assert lines[0].split() == ["single", "PE:", "2.00x", "(significant,", "+100%", "(95%", "CI", "+98%", "to", "+102%),",
                                "p<0.001)"]
    assert "not significant, p=1.00: no difference larger than 3% at this noise" in lines[1]
    assert "50.00x (significant, +4916%" in lines[2] and lines[2].endswith("the study: about 50x")   # 3 repeats decide
    assert "no test: one repeat, or no spread" in lines[3]
