"""A state dir, here or on a host, is vtb's user's own before anything is put there: another user
who made it first (or a link) would control root's pid files, sockets and writes."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.hosts import LocalHost
from harness.hosts.folders import state_dir_problem

HARNESS = str(Path(sys.executable).parent / "harness")


def test_a_state_dir_is_made_and_then_must_be_a_folder_of_vtbs_user_no_one_else_writes(tmp_path):
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


@pytest.mark.skipif(os.geteuid() != 0, reason="makes a folder owned by another user")
@pytest.mark.parametrize("command", [["testbed", "up"], ["run", "vm-scaling"], ["run", "ceph-scaling"]])
def test_this_machines_state_dir_of_another_user_is_refused_before_anything_is_made(tmp_path, command):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, 65534, 65534)
    out = subprocess.run([HARNESS, *command, "--set", f"state_dir={theirs}"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stdout + out.stderr
    assert f"state_dir: its state dir {theirs} belongs to uid 65534, not to uid 0" in out.stderr
    assert list(theirs.iterdir()) == []
