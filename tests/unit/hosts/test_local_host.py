"""Commands on this machine stop cleanly: on timeout and on cancel, the whole process group gets
SIGTERM first, so runners' traps clean up (real processes, no mocks)."""
import os
import signal
import subprocess
import threading
import time

import pytest

from harness.common.cancel import CANCEL, Cancelled
from harness.hosts import LocalHost

# A runner with a cleanup trap and a child of its own, as run-mysql.sh has (server, mount).
RUNNER = "trap 'echo cleaned > \"$1\"; exit 143' TERM; sleep 60 & wait"


def test_a_timeout_sends_term_to_the_group_so_traps_run(tmp_path):
    marker = tmp_path / "marker"
    t0 = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        LocalHost().run(["sh", "-c", RUNNER, "runner", str(marker)], timeout=0.5)
    assert marker.read_text() == "cleaned\n" and time.monotonic() - t0 < 10
    assert subprocess.run(["pgrep", "-f", f"{marker}"], capture_output=True).returncode == 1  # nothing left


def test_cancel_from_another_thread_stops_the_command(tmp_path):
    marker = tmp_path / "marker"
    threading.Timer(0.5, CANCEL.set).start()
    try:
        with pytest.raises(Cancelled):
            LocalHost().run(["sh", "-c", RUNNER, "runner", str(marker)], timeout=30)
    finally:
        CANCEL.clear()
    assert marker.read_text() == "cleaned\n"


def test_input_output_and_exit_status_as_subprocess_run():
    out = LocalHost().run(["sh", "-c", "cat; echo err >&2; exit 3"], input=b"in", check=False)
    assert (out.returncode, out.stdout, out.stderr) == (3, b"in", b"err\n")
    with pytest.raises(subprocess.CalledProcessError):
        LocalHost().run(["false"])



def test_a_command_whose_child_leaves_its_session_is_stopped_whole_within_its_bound(tmp_path, monkeypatch):
    """fio's job processes make sessions of their own (setsid), holding the pipes: a stop reaches
    them through the command's scope (its cgroup), and no wait after the kill is unbounded."""
    from harness.hosts import local, scopes
    if (probe := scopes.Scope.open()) is None:
        pytest.skip("no cgroup v2 with cgroup.kill here")
    probe.close()
    monkeypatch.setattr(local, "STOP_GRACE_S", 1)
    pidfile = tmp_path / "child.pid"
    script = f'setsid sh -c \'trap "" TERM; echo $$ > {pidfile}; exec sleep 300\' & wait'
    t0 = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        LocalHost().run(["sh", "-c", script], timeout=1)
    assert time.monotonic() - t0 < 1 + 1 + local.KILLED_WAIT_S
    child = int(pidfile.read_text())
    time.sleep(0.2)
    assert not os.path.exists(f"/proc/{child}") or "Z" in open(f"/proc/{child}/stat").read().split()[2]
    assert not [p for p in (scopes.cgroup2_mount() / scopes.PARENT).iterdir() if p.name.startswith(f"{os.getpid()}-")]


def test_a_daemon_a_command_starts_outlives_the_commands_scope(tmp_path):
    """A storage daemon that daemonizes is what the command meant to leave running."""
    pidfile = tmp_path / "d.pid"
    LocalHost().run(["sh", "-c", f"setsid sleep 300 >/dev/null 2>&1 < /dev/null & echo $! > {pidfile}"], timeout=10)
    time.sleep(0.3)
    pid = int(pidfile.read_text())
    try:
        assert os.path.exists(f"/proc/{pid}")
    finally:
        os.kill(pid, signal.SIGKILL)
