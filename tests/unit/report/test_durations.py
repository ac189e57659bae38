"""The durations table: a finished run's command, its point runs measured and failed, its wall time
against the plan's estimate, where and when; a run that did not finish is not in it."""
import json

from harness.report import durations


def _run(folder, status, rows, **manifest):
    folder.mkdir()
    (folder / "run.json").write_text(json.dumps({"status": status, "started": 1795807456.5, **manifest}))
    (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def test_a_finished_run_is_a_row_and_an_interrupted_one_is_not(tmp_path):
    rows = [{"point_id": "a/physical", "repeat": 0, "status": "ok", "metric": "iops"},
            {"point_id": "a/physical", "repeat": 0, "status": "ok", "metric": "lat_mean"},
            {"point_id": "a/virtual", "repeat": 0, "status": "failed", "metric": "iops"},
            {"point_id": "a/virtual", "repeat": "all", "status": "ok", "metric": "ve_pe_ratio"}]
    env = {"host": "nested", "accel": "kvm", "cpu_model": "AMD EPYC"}
    done = _run(tmp_path / "done", "completed-with-failures", rows, command="harness run mysql-raid --set host.kind=nested",
                wall_s=1208.2, estimate_s=180, environment=env)
    cut = _run(tmp_path / "cut", "interrupted", rows, command="harness run x", wall_s=5, environment=env)
    text = durations.markdown([done, cut])
    row = "| `harness run mysql-raid --set host.kind=nested` | 1 (1) | 20 min 8 s | 3 min 0 s | nested, kvm | 2026-11-27 |"
    assert row in text
    assert "harness run x" not in text and "Measured on: AMD EPYC" in text


def test_a_command_run_again_shows_its_latest_figure_only(tmp_path):
    rows = [{"point_id": "a/physical", "repeat": 0, "status": "ok", "metric": "iops"}]
    runs = [_run(tmp_path / f"r{i}", "completed", rows, command="harness run backends", wall_s=wall, estimate_s=1200,
                 environment={}) for i, wall in enumerate((1154.0, 1134.7))]
    text = durations.markdown(runs)
    assert "18 min 55 s" in text and "19 min 14 s" not in text and text.count("harness run backends") == 1
