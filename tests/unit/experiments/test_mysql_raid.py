"""The mysql-raid experiment: its settings and refusals, its setups and points, and its summary
(rows over repeats, the table that says what stands in for TPC-C, the plot)."""
import pytest

from harness.engine import settings
from harness.experiments import mysql_raid
from harness.results.samples import Sample


def test_defaults_compare_two_levels_and_full_sweeps_the_studys_one_member_alone_first(tmp_path):
    cfg = settings.load(None)
    setups = mysql_raid.EXPERIMENT.setups(cfg)
    assert [s.label for s in setups] == ["single"] + [f"raid{lv}-n4-c{cfg.raid.chunk_kib}k" for lv in (5, 10)]
    full = mysql_raid.EXPERIMENT.setups(settings.load(None, ["mysql_raid.full=true"]))   # the study's matrix
    assert [s.label for s in full] == ["single"] + [f"raid{lv}-n4-c{cfg.raid.chunk_kib}k" for lv in (0, 1, 5, 6, 10)]
    assert settings.load(None, ["mysql_raid.full=true", "mysql_raid.levels=[1]"]).mysql_raid.levels == [1]
    (point,) = mysql_raid.EXPERIMENT.points(cfg)
    assert point.label == "oltp_read_write" and point.db.threads == 16 and point.db.filesystem == "ext4"


def test_settings_refuse_what_cannot_fit_by_name():
    with pytest.raises(ValueError, match=r"40 tables of 10000 rows need about \d+ MiB .* raise size_mib"):
        mysql_raid.Settings(tables=40)
    with pytest.raises(ValueError, match=r"mysql_raid.size_mib=128 .* mkfs.xfs"):
        mysql_raid.Settings(filesystem="xfs")
    with pytest.raises(ValueError, match="no RAID level"):
        mysql_raid.Settings(levels=[6], members=3)
    assert mysql_raid.Settings(filesystem="xfs", size_mib=300).size_mib == 300


def sample(setup, test, env, metric, value, status="ok"):
    meta = {"setup": setup, "db_test": test, "env": env, "repeat": 0, "host_quiet": True, "scope": "aggregate"}
    return Sample(metric, value, "tx/s", meta, status=status, error="" if status == "ok" else "run-mysql: no space")


def test_rows_table_and_plot(tmp_path):
    samples = [sample(s, "oltp_read_write", e, m, v * (1 + 0.01 * r)) for r in range(3)
               for s in ("single", "raid5-n4-c512k") for e, f in (("physical", 1.0), ("virtual", 0.4))
               for m, v in (("aggregate_tps", 100 * f), ("lat_p95", 50 / f))]
    # a VM's own sample has the same metric name: only the aggregate counts
    samples.append(Sample("lat_p95", 1e6, "ms", {"setup": "single", "db_test": "oltp_read_write", "env": "virtual",
                                                  "repeat": 0, "scope": "vm"}))
    samples.append(sample("raid6-n4-c512k", "oltp_read_write", "virtual", "aggregate_tps", None, status="error"))
    rows = mysql_raid.tps_rows(samples)
    single = next(r for r in rows if r["setup"] == "single")
    assert single["physical_aggregate_tps"] == pytest.approx(101) and single["virtual_lat_p95"] == pytest.approx(126.25)
    text = " ".join(mysql_raid.print_tps(rows, "kvm in a nested host under tcg", mysql_raid.Settings()).split())
    assert "raid6-n4-c512k oltp_read_write failed: virtual: run-mysql: no space" in text
    assert "stands in for the study's TPC-C" in text and "0.40" in text   # VE/PE
    assert mysql_raid.tps_bars(rows, tmp_path / "mysql-raid.png", "t").stat().st_size > 10_000


def test_an_array_study_on_this_machine_without_md_is_refused_before_anything_is_made(monkeypatch):
    """Asked of this machine only: a nested host or [[hosts]] are asked when the run reaches them."""
    from harness.resources import raid
    asked = []
    monkeypatch.setattr(raid, "md_support", lambda host: asked.append(host.kind) or "no md here. Fix: host.kind=nested")
    from harness.common.exits import StepFailed
    with pytest.raises(StepFailed, match="no md here. Fix: host.kind=nested"):   # exit 4, as on any host without md
        mysql_raid.EXPERIMENT.refusal(settings.load(None))
    assert mysql_raid.EXPERIMENT.refusal(settings.load(None, ["host.kind=nested"])) is None
    assert asked == ["local"]
