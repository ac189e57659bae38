"""#43: a storage daemon is signalled by its pid file only while the proof beside it (its boot and
start time) holds: a pid file in the state dir outlives a reboot, and its pid may be any process's
by then. Real processes (`sleep`) stand for the daemons, through the fleet's host node."""
import json
import signal
import subprocess

import pytest

from harness.backends.base import daemon_alive, record_daemon, stop_daemon
from harness.common import pids
from harness.hosts import LocalHost


@pytest.fixture
def sleeper():
    proc = subprocess.Popen(["sleep", "60"])
    yield proc
    proc.kill()
    proc.wait()


def _pid_file(tmp_path, pid: int):
    pidfile = tmp_path / "vtb-x-run" / "qsd.pid"
    pidfile.parent.mkdir()
    pidfile.write_text(f"{pid}\n")
    return pidfile


def test_a_daemon_with_its_proof_is_alive_and_stopped_and_its_files_go(tmp_path, sleeper):
    pidfile, sock = _pid_file(tmp_path, sleeper.pid), tmp_path / "vtb-x-run" / "qsd.sock"
    sock.touch()
    record_daemon(LocalHost(), pidfile, "sleep")
    assert json.loads((tmp_path / "vtb-x-run" / "qsd.pid.proof").read_text()) == pids.proof(sleeper.pid)
    assert daemon_alive(LocalHost(), pidfile)
    stop_daemon(LocalHost(), pidfile, 5, sock)
    assert sleeper.wait(timeout=10) == -signal.SIGTERM
    assert list(pidfile.parent.iterdir()) == []


@pytest.mark.parametrize("other", [{"start": 1}, {"boot_id": "a boot before a reboot"}, None],
                         ids=["start time differs", "another boot", "no proof"])
def test_a_pid_the_proof_does_not_prove_is_never_signalled(tmp_path, sleeper, other):
    """The pid file names a live process that is not the one recorded (a pid reused after the
    daemon died, or after a reboot), or that no proof names: nothing is signalled, and the pid file
    stays for gc's process rule (which knows vtb's daemons by their pid files)."""
    pidfile = _pid_file(tmp_path, sleeper.pid)
    if other is not None:
        (tmp_path / "vtb-x-run" / "qsd.pid.proof").write_text(json.dumps({**pids.proof(sleeper.pid), **other}))
    assert not daemon_alive(LocalHost(), pidfile)
    stop_daemon(LocalHost(), pidfile, 1)
    assert sleeper.poll() is None and pidfile.exists()


def test_a_pid_file_that_names_no_running_process_is_refused(tmp_path):
    gone = subprocess.Popen(["true"])
    gone.wait()
    with pytest.raises(RuntimeError, match="wrote no pid file of a running process"):
        record_daemon(LocalHost(), _pid_file(tmp_path, gone.pid), "sleep", within_s=0.2)
