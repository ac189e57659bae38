"""Commands run in sessions of their own are recorded while they run, so that gc stops those a
killed harness left running (a terraform apply holding its lock, a host fio), and only those."""
import json
import subprocess
import threading
import time

from harness.hosts import LocalHost, sessions
from harness.store import _start_ticks, owner


def test_a_local_command_is_recorded_while_it_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(sessions, "RECORDS", tmp_path / "sessions")
    t = threading.Thread(target=LocalHost().run, args=(["sleep", "2"],))
    t.start()
    time.sleep(0.5)
    (record,) = [json.loads(p.read_text()) for p in (tmp_path / "sessions").glob("*.json")]
    assert record["command"] == "sleep" and record["owner"] == owner() and record["start"] == _start_ticks(record["pid"])
    assert sessions.stop_orphans() == []   # its owner (this process) is alive: kept
    t.join()
    assert not list((tmp_path / "sessions").glob("*.json"))


def test_a_session_whose_harness_was_killed_is_stopped_and_no_other(tmp_path, monkeypatch):
    monkeypatch.setattr(sessions, "RECORDS", tmp_path / "sessions")
    dead = subprocess.Popen(["true"])
    dead.wait()
    killed_harness = {**owner(), "pid": dead.pid, "start": 1}
    orphan = subprocess.Popen(["sleep", "60"], start_new_session=True)
    reused = subprocess.Popen(["sleep", "60"], start_new_session=True)   # its pid in a record, another start
    (tmp_path / "sessions").mkdir(mode=0o700)
    for name, pid, start in (("a", orphan.pid, _start_ticks(orphan.pid)), ("b", reused.pid, 1)):
        (tmp_path / "sessions" / f"{name}.json").write_text(
            json.dumps({"owner": killed_harness, "pid": pid, "start": start, "command": "terraform"}))
    try:
        (tmp_path / "sessions").chmod(0o777)
        assert sessions.stop_orphans() == [] and orphan.poll() is None   # records anyone could have written
        (tmp_path / "sessions").chmod(0o700)
        said = sessions.stop_orphans()
        assert said == [f"session {orphan.pid} (terraform), left running by a killed harness"]
        assert orphan.wait(timeout=10) == -9 and reused.poll() is None
        assert not list((tmp_path / "sessions").glob("*.json"))
    finally:
        reused.kill()
        orphan.kill()
