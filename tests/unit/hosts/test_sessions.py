"""Commands run in sessions of their own are recorded while they run, so that gc stops those a
killed harness left running (a terraform apply holding its lock, a host fio), and only those."""
import json
import subprocess
import threading
import time

import pytest

from harness.common.pids import owner, start_ticks
from harness.hosts import LocalHost, orphans, scopes, sessions


@pytest.fixture(autouse=True)
def no_other_scopes(monkeypatch):
    """These tests are of the session records: the command scopes of other processes on this
    machine (a run the other lane killed a moment ago) are not theirs to count (test_local_host.py has the scopes)."""
    monkeypatch.setattr(scopes, "collect", lambda: [])


def test_a_local_command_is_recorded_while_it_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(sessions, "RECORDS", tmp_path / "sessions")
    t = threading.Thread(target=LocalHost().run, args=(["sleep", "2"],))
    t.start()
    time.sleep(0.5)
    (record,) = [json.loads(p.read_text()) for p in (tmp_path / "sessions").glob("*.json")]
    assert record["command"] == "sleep" and record["owner"] == owner() and record["start"] == start_ticks(record["pid"])
    assert orphans.stop_orphans() == []   # its owner (this process) is alive: kept
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
    for name, pid, start in (("a", orphan.pid, start_ticks(orphan.pid)), ("b", reused.pid, 1)):
        (tmp_path / "sessions" / f"{name}.json").write_text(
            json.dumps({"owner": killed_harness, "pid": pid, "start": start, "command": "terraform"}))
    try:
        (tmp_path / "sessions").chmod(0o777)
        assert orphans.stop_orphans() == [] and orphan.poll() is None   # records anyone could have written
        (tmp_path / "sessions").chmod(0o700)
        said = orphans.stop_orphans()
        assert said == [f"session {orphan.pid} (terraform), left running by a killed harness"]
        assert orphan.wait(timeout=10) == -9 and reused.poll() is None
        assert not list((tmp_path / "sessions").glob("*.json"))
    finally:
        reused.kill()
        orphan.kill()


def test_a_remote_session_on_a_host_already_found_silent_costs_no_second_timeout(tmp_path, monkeypatch):
    """gc and `down --all` ask each [[hosts]] entry once (hosts.answers) and hand the answers on:
    a dead host's record is kept for the next gc without another ssh bound spent on it."""
    from harness.hosts.ssh import SshHost
    monkeypatch.setattr(sessions, "RECORDS", tmp_path / "sessions")
    dead = subprocess.Popen(["true"])
    dead.wait()
    host = SshHost(name="gone", target="root@192.0.2.1", port=22, identity=None, known_hosts=None,
                   remote_dir="/var/tmp/vtb", devices=())
    (tmp_path / "sessions").mkdir(mode=0o700)
    record = tmp_path / "sessions" / "r.json"
    record.write_text(json.dumps({"owner": {**owner(), "pid": dead.pid, "start": 1}, "ssh": host.descriptor(),
                                  "tag": "/tmp/vtb-run-0123456789abcdef.pid", "command": "fio"}))
    monkeypatch.setattr(SshHost, "unanswered", lambda self: pytest.fail("asked again"))
    t0 = time.monotonic()
    assert orphans.stop_orphans({host.label: f"{host.label} does not answer over SSH (timed out)"}) == []
    assert time.monotonic() - t0 < 2 and record.exists()   # kept for the next gc
