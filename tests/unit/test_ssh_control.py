"""ssh's control sockets live in a folder private to this user: whoever makes the socket at a
shared path first receives every command vtb sends and its input, and can forge the replies."""
from __future__ import annotations

import os

import pytest

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

