"""ssh's control sockets live in a folder private to this user (whoever makes the socket at a
shared path first receives every command vtb sends and its input, and can forge the replies), and
a host's state dir is vtb's user's own before anything is put there."""
from __future__ import annotations

import os

import pytest

from harness.hosts import LocalHost
from harness.hosts.ssh import SshError, SshHost, control_dir, state_dir_problem


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


def test_a_hosts_state_dir_is_made_and_then_must_be_a_folder_of_vtbs_user_no_one_else_writes(tmp_path):
    """Run through the same shell check an ssh host runs (here on this machine): another user's
    folder, a world-writable one or a link would give that user root's pid files and sockets."""
    host = LocalHost()
    fresh = tmp_path / "vtb"
    assert state_dir_problem(host, str(fresh), "[[hosts]] h") is None and fresh.is_dir()
    writable = tmp_path / "open"
    writable.mkdir()
    writable.chmod(0o777)
    assert "can be written by other users (mode 0777)" in state_dir_problem(host, str(writable), "[[hosts]] h")
    link = tmp_path / "link"
    link.symlink_to(fresh)
    why = state_dir_problem(host, str(link), "[[hosts]] h")
    assert "symbolic link" in why and f"Fix: remove {link} there" in why
    if os.geteuid() == 0:
        theirs = tmp_path / "theirs"
        theirs.mkdir()
        os.chown(theirs, 65534, 65534)
        assert "belongs to uid 65534, not to uid 0" in state_dir_problem(host, str(theirs), "[[hosts]] h")
