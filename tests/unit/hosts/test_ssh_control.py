"""ssh's control sockets live in a folder private to this user: whoever makes the socket at a
shared path first receives every command vtb sends and its input, and can forge the replies."""
from __future__ import annotations

import os
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
        if tag.exists() and len(tag.read_text().split()) == 2:
            break
        time.sleep(0.05)
    return proc


def test_a_remote_session_is_stopped_by_its_tag_only_while_its_start_time_matches(tmp_path):
    """#28: a tag left by a session that ended abnormally names a pid the host may have given to
    another process since: gc's stop then signals nothing (the start time differs)."""
    stop = ["sh", "-c", ssh.STOP_SESSION, "-"]
    live, tag = _session(tmp_path / "a.pid"), tmp_path / "a.pid"
    done = subprocess.run([*stop, str(tag), "2"], capture_output=True, text=True, timeout=30)
    assert done.stdout.strip() == "running" and live.wait(timeout=10) is not None and not tag.exists()
    other, tag = _session(tmp_path / "b.pid"), tmp_path / "b.pid"
    pid, start = tag.read_text().split()
    tag.write_text(f"{pid} {int(start) + 1}\n")   # the same pid, another process
    try:
        done = subprocess.run([*stop, str(tag), "2"], capture_output=True, text=True, timeout=30)
        assert done.stdout.strip() == "" and other.poll() is None and not tag.exists()
    finally:
        other.kill()
        other.wait()
