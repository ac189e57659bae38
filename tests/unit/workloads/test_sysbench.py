"""sysbench output parsing (recorded real 1.0.20 outputs) and the mysql sweep plan."""
import pytest

from harness.config.core import ConfigError
from harness.engine import settings
from harness.experiments.mysql import plan
from harness.workloads import sysbench
from harness.workloads.sysbench import DbPoint


def test_parse_read_only(fixture_text):
    r = sysbench.parse(fixture_text("sysbench/host-oltp_read_only.txt"))
    assert (r.tps, r.qps, r.lat_avg_ms, r.lat_p95_ms, r.errors_per_s) == (3768.54, 60296.67, 1.06, 1.67, 0.0)


def test_parse_read_write(fixture_text):
    r = sysbench.parse(fixture_text("sysbench/host-oltp_read_write.txt"))
    assert r.tps == 971.25 and r.qps == 19441.41 and r.lat_p95_ms == 9.39 and r.errors_per_s == 1.0


def test_parse_refuses_incomplete_output():
    with pytest.raises(ValueError, match="transactions"):
        sysbench.parse("FATAL: unable to connect to MySQL server")


def test_buffer_pool_is_a_fraction_of_the_data_with_mariadbs_floor():
    big = DbPoint("oltp_read_only", 16, "16k", 0.1, 0, 8, 100000, 10, "ext4")
    assert big.buffer_pool_bytes == int(8 * 100000 * sysbench.ROW_BYTES * 0.1) >> 20 << 20
    small = DbPoint("oltp_read_only", 16, "64k", 0.03, 0, 2, 1000, 10, "ext4")
    assert small.buffer_pool_bytes == 24 << 20 and small.metadata()["db_buffer_pool_clamped"]


def test_plan_sweeps_one_axis_at_a_time():
    cfg = settings.load(None, ['mysql.tests=["oltp_read_only","oltp_write_only"]', "mysql.threads=[4,16]",
                             "mysql.vm_counts=[1,2,4]", 'mysql.page_sizes=["16k","4k"]'])
    planned, skipped = plan(cfg, fleet_size=2)
    assert [(p.axis, p.point.test, p.point.threads, p.point.page_size, p.vm_count) for p in planned] == [
        ("base", "oltp_read_only", 4, "16k", 1), ("tests", "oltp_write_only", 4, "16k", 1),
        ("threads", "oltp_read_only", 16, "16k", 1), ("page_sizes", "oltp_read_only", 4, "4k", 1),
        ("vm_counts", "oltp_read_only", 4, "16k", 2)]
    assert list(skipped) == ["oltp_read_only-t4-p16k-bp0.1-n4"]


@pytest.mark.parametrize("override, message", [
    ("mysql.threads=[0]", "between 1 and 64"), ("mysql.threads=[65]", "between 1 and 64"),
    ("mysql.buffer_pool_fractions=[0.9]", "between 0.03 and 0.5"), ('mysql.page_sizes=["2k"]', "mysql.page_sizes"),
    ("mysql.compression=[2]", "mysql.compression"), ('mysql.tests=["tpcc"]', "mysql.tests"),
])
def test_bad_sweep_values(override, message):
    with pytest.raises(ConfigError, match=message):
        settings.load(None, [override])
