"""Commands vtb runs in sessions of their own (so that a timeout or Ctrl-C stops their whole tree)
outlive a harness killed with SIGKILL: a terraform apply holding its state lock, a host-side fio,
a command on an ssh host. Each is recorded while it runs (its session's pid and start time, and
its owner's), so that gc stops exactly those whose owner is gone (harness/hosts/orphans.py), and
nothing else."""
from __future__ import annotations

import contextlib
import json
import os
import stat
import uuid
from pathlib import Path

from harness.common.pids import owner, start_ticks

RECORDS = Path(os.environ.get("VTB_RUN_DIR", "/run/vtb")) / "sessions"


@contextlib.contextmanager
def recorded(**what):
    """A record of one running command (`pid` for a local session, or `ssh` and `tag` for one on an
    ssh host), removed when it ends. Where records cannot be written (not root), none is kept."""
    path = RECORDS / f"{os.getpid()}-{uuid.uuid4().hex[:12]}.json"
    if "pid" in what:
        what["start"] = start_ticks(what["pid"])
    try:
        RECORDS.mkdir(mode=0o700, parents=True, exist_ok=True)
        path.write_text(json.dumps({"owner": owner(), **what}))
    except OSError:
        path = None
    try:
        yield
    finally:
        if path is not None:
            path.unlink(missing_ok=True)


def records() -> list[Path]:
    """The record files, only from a folder that is root's own and private (a record names a
    process group to kill)."""
    try:
        st = RECORDS.lstat()
    except OSError:
        return []
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        return []
    return sorted(p for p in RECORDS.glob("*.json") if p.lstat().st_uid == os.geteuid() and p.is_file())
