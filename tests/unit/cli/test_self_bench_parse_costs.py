"""`harness bench` measures what reading fio's reports costs, on a run's raw outputs."""
import shutil
from pathlib import Path

from harness.cli import self_bench

FIXTURES = Path(__file__).parents[2] / "fixtures" / "fio"


def test_parse_costs_are_measured_on_the_runs_raw_outputs(tmp_path):
    for name in ("fio-3.33-numjobs2-group.jsonplus.json", "fio-3.33-randrw-unified.jsonplus.json"):
        (tmp_path / "p").mkdir(exist_ok=True)
        shutil.copy(FIXTURES / name, tmp_path / "p" / name)
    costs = self_bench._parse_costs(tmp_path, rounds=2)
    assert set(costs) == {"fio_parse_ms_per_output", "fio_parse_jobs_ms_per_output",
                          "percentiles_of_2_merged_histograms_ms"}
    assert all(v > 0 for v in costs.values())
    assert self_bench._parse_costs(tmp_path / "none") == {}
