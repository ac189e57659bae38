"""ssh's control sockets live in a folder private to this user: whoever makes the socket at a
shared path first receives every command vtb sends and its input, and can forge the replies."""
from __future__ import annotations

import os
import shlex
import subprocess
import time
from pathlib import Path

import pytest

from harness.hosts import ssh
from harness.hosts.ssh import SshError, SshHost, control_dir


def control_path(host: SshHost) -> str:
    opts = host.ssh_options()
    return next(o.split("=", 1)[1] for o in opts if o.startswith("ControlPath="))


def test_the_control_socket_is_in_a_private_folder_never_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    path = control_path(SshHost("h", "root@127.0.0.1"))
    assert path == f"{tmp_path}/vtb-ssh/%C" and not path.startswith("/tmp/vtb")
    assert (tmp_path / "vtb-ssh").stat().st_mode & 0o777 == 0o700


def test_a_control_folder_others_can_write_is_refused_with_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    (tmp_path / "vtb-ssh").mkdir(mode=0o777)
    os.chmod(tmp_path / "vtb-ssh", 0o777)
    with pytest.raises(SshError, match=r"not private to this user .*mode 0777.*Fix: remove"):
        control_dir()


@pytest.mark.skipif(os.geteuid() != 0, reason="makes a folder owned by another user")
def test_a_control_folder_of_another_user_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    (tmp_path / "vtb-ssh").mkdir(mode=0o700)
    os.chown(tmp_path / "vtb-ssh", 65534, 65534)
    with pytest.raises(SshError, match="owner uid 65534"):
        control_dir()



def _session(tag: Path) -> subprocess.Popen:
    """A session as SshHost.run starts one there: its tag holds its pid and start time."""
    proc = subprocess.Popen(["setsid", "-w", "sh", "-c", ssh.tagged(str(tag), "sleep 60")])
    for _ in range(100):
        if tag.exists() and len(tag.read_text().split()) >= 2:
            break
        time.sleep(0.05)
    return proc


def test_a_remote_session_is_stopped_by_its_tag_only_while_its_start_time_matches(tmp_path):
    """#28: a tag left by a session that ended abnormally names a pid the host may have given to
    another process since: gc's stop then signals nothing (the start time differs)."""
    stop = ["sh", "-c", ssh.STOP_SESSION, "-"]
    live, tag = _session(tmp_path / "vtb-run-a.pid"), tmp_path / "vtb-run-a.pid"
    done = subprocess.run([*stop, str(tag), "2"], capture_output=True, text=True, timeout=30)
    assert done.stdout.strip() == "running" and live.wait(timeout=10) is not None and not tag.exists()
    other, tag = _session(tmp_path / "vtb-run-b.pid"), tmp_path / "vtb-run-b.pid"
    pid, start, *scope = tag.read_text().split()
    tag.write_text(f"{pid} {int(start) + 1}\n")   # the same pid, another process (and no scope of the session's)
    try:
        done = subprocess.run([*stop, str(tag), "2"], capture_output=True, text=True, timeout=30)
        assert done.stdout.strip() == "" and other.poll() is None and not tag.exists()
    finally:
        other.kill()
        other.wait()
        for path in scope:
            Path(path).rmdir()


def test_a_remote_sessions_scope_stops_what_left_its_session_and_releases_a_daemon(tmp_path):
    """As SshHost.run runs a command there (here, without ssh): its scope (a cgroup) holds what
    left the session (fio's jobs make sessions of their own), which the stop kills; a session that
    ends by itself leaves its daemon running, moved out of the scope, and the scope goes."""
    from harness.hosts import scopes
    if (probe := scopes.Scope.open()) is None:
        pytest.skip("no cgroup v2 with cgroup.kill here")
    probe.close()
    tag, pidfile = tmp_path / "vtb-run-abc.pid", tmp_path / "escaped.pid"
    escape = f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 300' & wait"
    proc = subprocess.Popen(["setsid", "-w", "sh", "-c", ssh.tagged(str(tag), f"sh -c {shlex.quote(escape)}")])
    for _ in range(100):
        if pidfile.exists() and pidfile.read_text().strip():
            break
        time.sleep(0.05)
    scope = Path(tag.read_text().split()[2])
    assert scope.name == "vtb-run-abc" and int(pidfile.read_text()) in map(int, (scope / "cgroup.procs").read_text().split())
    out = subprocess.run(["sh", "-c", ssh.STOP_SESSION, "-", str(tag), "1"], capture_output=True, text=True, timeout=30)
    assert "running" in out.stdout and not scope.exists() and not tag.exists()
    proc.wait(timeout=10)
    time.sleep(0.1)
    assert not Path(f"/proc/{int(pidfile.read_text())}/cmdline").exists() or \
        "Z" == Path(f"/proc/{int(pidfile.read_text())}/stat").read_text().split()[2]

    daemon = f"setsid sleep 300 > /dev/null 2>&1 < /dev/null & echo $! > {pidfile}"
    subprocess.run(["setsid", "-w", "sh", "-c", ssh.tagged(str(tag), f"sh -c {shlex.quote(daemon)}")], timeout=30)
    scope = Path(tag.read_text().split()[2])
    subprocess.run(["sh", "-c", ssh.RELEASE_SCOPE, "-", str(tag)], timeout=30)
    pid = int(pidfile.read_text())
    try:
        assert Path(f"/proc/{pid}").exists() and not scope.exists()
    finally:
        os.kill(pid, 9)
