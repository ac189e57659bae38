"""The runs index rebuilt from the run folders: a folder whose run.json is not a run's manifest is
left out and said, never a traceback."""
import json

from harness.results.store import RunIndex


def test_a_folder_without_a_runs_manifest_is_left_out_and_said(tmp_path, capsys):
    (tmp_path / "20261207-120000-iops-1").mkdir()
    (tmp_path / "20261207-120000-iops-1" / "run.json").write_text(json.dumps(
        {"run_id": "20261207-120000-iops-1", "experiment": "iops", "status": "completed", "started": 1.0}))
    for name, text in (("hand-made", json.dumps({"status": "completed"})), ("cut", "{\"run_id\": "), ("list", "[1]")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "run.json").write_text(text)
    index = RunIndex(tmp_path)
    index.rebuild()
    assert [r["run_id"] for r in index.list()] == ["20261207-120000-iops-1"]
    said = capsys.readouterr()
    assert all(f"{tmp_path / name / 'run.json'}: not a run's manifest" in said.out + said.err
               for name in ("hand-made", "cut", "list"))
