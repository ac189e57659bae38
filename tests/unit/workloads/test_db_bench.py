"""db_bench output parsing (recorded real 7.8.3 outputs of guest-agents/run-db-bench.sh) and the
rocksdb experiment's settings, rows and plot."""
import pytest

from harness.experiments import rocksdb
from harness.results.samples import Sample
from harness.workloads import db_bench


def test_a_read_benchmark_is_measured_after_the_loader():
    assert db_bench.benchmarks("readrandom") == "fillseq,readrandom"
    assert db_bench.benchmarks("fillrandom") == "fillrandom"


def test_the_measured_benchmark_is_the_last_one_named(fixture_text):
    r = db_bench.parse(fixture_text("db_bench/readrandom.txt"))
    assert (r.benchmark, r.ops_s, r.us_per_op, r.mb_s, r.p50_us, r.p99_us) == \
        ("readrandom", 1074575.0, 0.922, 426.3, 0.54, 1.97)       # not the loader's fillseq figures
    assert r.version == "rocksdb 7.8.3"


@pytest.mark.parametrize("name,ops,p99", [("fillseq", 566123.0, 46.75), ("fillrandom", 438981.0, 21.61),
                                          ("readseq", 5882352.0, 0.99)])
def test_each_benchmark(fixture_text, name, ops, p99):
    r = db_bench.parse(fixture_text(f"db_bench/{name}.txt"))
    assert (r.benchmark, r.ops_s, r.p99_us) == (name, ops, p99)
    assert set(r.metrics()) == {"ops", "us_per_op", "mb_s", "lat_p50", "lat_p99"}


def test_output_without_a_result_is_refused():
    with pytest.raises(ValueError, match="no benchmark result line"):
        db_bench.parse("db_bench version 7.8.3\nIO error: No space left on device")


def test_the_setups_are_one_member_alone_then_each_level_and_the_points_each_benchmark():
    from harness.engine import settings
    cfg = settings.load(None)
    assert [s.label for s in rocksdb.EXPERIMENT.setups(cfg)] == ["single"] + [
        f"raid{lv}-n4-c{cfg.raid.chunk_kib}k" for lv in (0, 1, 10)]
    assert rocksdb.EXPERIMENT.filesystems(cfg) == ["ext4"]
    assert [p.label for p in rocksdb.EXPERIMENT.points(cfg)] == ["fillseq", "fillrandom", "readrandom", "readseq"]


def test_settings_refuse_what_cannot_fit_by_name():
    assert rocksdb.Settings().levels == [0, 1, 10]
    with pytest.raises(ValueError, match=r"num=1000000 keys .* lower num or raise size_mib"):
        rocksdb.Settings(num=1_000_000)
    with pytest.raises(ValueError, match=r"rocksdb.size_mib=128 .* mkfs.xfs"):
        rocksdb.Settings(filesystem="xfs")
    with pytest.raises(ValueError, match="no RAID level"):
        rocksdb.Settings(levels=[10], members=3)


def sample(setup, bench, env, metric, value, status="ok"):
    meta = {"setup": setup, "benchmark": bench, "env": env, "repeat": 0, "host_quiet": True}
    return Sample(metric, value, "ops/s", meta, status=status, error="" if status == "ok" else "db_bench exited 1")


def test_rows_plot_and_summary(tmp_path):
    samples = [sample(s, b, e, m, v * (1 + 0.01 * r)) for r in range(3)
               for s in ("single", "raid0-n4-c512k") for b in ("fillseq", "readrandom")
               for e, f in (("physical", 1.0), ("virtual", 0.5)) for m, v in (("ops", 1000 * f), ("us_per_op", 10 / f))]
    samples.append(sample("raid1-n4-c512k", "fillseq", "virtual", "ops", 0, status="error"))
    rows = rocksdb.db_rows(samples, order=["readrandom", "fillseq"])
    assert [(r["setup"], r["point"]) for r in rows][:3] == [("single", "readrandom"), ("single", "fillseq"),
                                                           ("raid0-n4-c512k", "readrandom")]   # the config's order
    single = next(r for r in rows if r["setup"] == "single" and r["point"] == "fillseq")
    assert single["physical_ops"] == pytest.approx(1010) and single["virtual_us_per_op"] == pytest.approx(20.2)
    text = rocksdb.print_rows(rows, "tcg", rocksdb.Settings())
    assert "raid1-n4-c512k fillseq failed: virtual: db_bench exited 1" in " ".join(text.split())
    png = rocksdb.db_bars(rows, tmp_path / "rocksdb.png", "t")
    assert png.stat().st_size > 10_000
