"""harness bench's figures from what ran before it: the main job's last run (a recorded real one:
its manifest and its aggregate samples, trimmed to the columns read) and a fresh machine's log."""
import shutil
from pathlib import Path

import pytest

from harness.cli import bench_runs
from harness.report import bench_table

RECORDED = Path(__file__).parents[2] / "fixtures" / "runs" / "main-job"


def test_the_main_jobs_wall_over_fio_overhead_and_skew_by_point(tmp_path):
    shutil.copytree(RECORDED, tmp_path, dirs_exist_ok=True)
    figures = bench_runs.main_job(tmp_path)
    assert figures["main_job_run_id"] == "20261207-151052-vm-scaling-1364"
    assert figures["main_job_fio_s"] == 18 * 12          # 6 points x 3 repeats, 10 s runtime + 2 s ramp
    assert figures["main_job_wall_over_fio"] == pytest.approx(386.2 / 216, abs=1e-3)
    overhead = figures["main_job_overhead_per_point_s"]
    assert set(overhead) == {f"{env}-n{n}" for env in ("physical", "virtual") for n in (1, 2, 4)}
    assert overhead["physical-n1"] == pytest.approx(13.445 - 12 - 1.01, abs=0.01)
    assert set(figures["main_job_start_skew_s"]) == {"physical-n2", "physical-n4", "virtual-n2", "virtual-n4"}
    assert "| its wall time over its fio time | 1.788 |" in bench_table.markdown({**figures, "accel": "tcg"})


def test_no_main_job_run_no_figures(tmp_path):
    assert bench_runs.main_job(tmp_path) == {}


def test_a_fresh_machines_log_by_step(tmp_path):
    log = tmp_path / "first-result.log"
    log.write_text("0.1 [packages] host packages: installing qemu-system-x86 ...\n"
                   "61.0 [packages] done in 61 s\n"
                   "99.2 [venv] done in 38 s\n"
                   "190.5 [image] done in 129 s\n"
                   "230.0 vtb-first-result: testbed up done\n"
                   "250.1    12.3s    virtual-n1 (repeat 1)\n"
                   "265.0    27.2s        aggregate_iops 5,640.2 IOPS; host busy 63%, settled in 0.5s\n"
                   "530.4 vtb-first-result: done (exit 0)\n")
    figures = bench_runs.first_result(log)
    assert figures["first_result_steps_s"] == {"packages": 61.0, "venv": 38.0, "image": 129.0}
    assert (figures["first_result_testbed_up_s"], figures["first_result_first_point_s"], figures["first_result_s"]) \
        == (230.0, 265.0, 530.4)


def test_a_failed_first_result_gives_no_figure(tmp_path):
    log = tmp_path / "first-result.log"
    log.write_text("230.0 vtb-first-result: testbed up done\n300.0 vtb-first-result: done (exit 1)\n")
    assert bench_runs.first_result(log) == {}
    assert bench_runs.first_result(tmp_path / "none.log") == {}


def test_bench_runs_writes_its_own_section_and_measures_nothing(tmp_path):
    from click.testing import CliRunner

    from harness.cli import cli
    shutil.copytree(RECORDED, tmp_path / "results")
    page = tmp_path / "page.md"
    page.write_text(f"before\n{bench_table.FIGURES[0]}\nkept\n{bench_table.FIGURES[1]}\n{bench_table.RUNS[0]}\n{bench_table.RUNS[1]}\nafter\n")
    done = CliRunner().invoke(cli, ["bench", "--runs", "--docs", str(page), "--set", f"results_dir={tmp_path / 'results'}"])
    assert done.exit_code == 0, done.output
    text = page.read_text()
    assert "kept" in text and "| its wall time over its fio time | 1.788 |" in text and text.endswith("after\n")
