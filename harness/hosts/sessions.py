"""Commands vtb runs in sessions of their own (so that a timeout or Ctrl-C stops their whole tree)
outlive a harness killed with SIGKILL: a terraform apply holding its state lock, a host-side fio,
a command on an ssh host. Each is recorded while it runs (its session's pid and start time, and
its owner's), so that gc stops exactly those whose owner is gone, and nothing else."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import uuid
from pathlib import Path

from harness.common.pids import owner, owner_alive, start_ticks
from harness.hosts import scopes

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


def stop_orphans(asked: dict[str, str | None] | None = None) -> list[str]:
    """Stops the recorded sessions whose harness is gone (SIGKILL to a local session's group, the
    ssh host's own stop for a remote one); says what it stopped. Records of live harnesses are
    kept, and so is one of a remote session its host did not answer for (the next gc tries again).
    `asked`: hosts' answers already known, by label (a dead host costs its timeout once in all).
    Passes until a pass stops nothing: a hook's harness outlives its terraform by a moment."""
    stopped: list[str] = []
    silent: dict[str, str | None] = dict(asked or {})   # each ssh host asked once
    for _ in range(3):
        done = [said for path in _records() if (said := _stop(path, silent))]
        stopped += [s for s in done if s != "-"]
        if not done:
            break
    # what a killed run's commands started in other sessions (fio's jobs), by their scopes
    return stopped + [f"the processes of command scope {path}" for path in scopes.collect()]


def _records() -> list[Path]:
    """The record files, only from a folder that is root's own and private (a record names a
    process group to kill)."""
    try:
        st = RECORDS.lstat()
    except OSError:
        return []
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        return []
    return sorted(p for p in RECORDS.glob("*.json") if p.lstat().st_uid == os.geteuid() and p.is_file())


def _stop(path: Path, silent: dict[str, str | None]) -> str:
    """One record: "" when its owner lives (kept), "-" when nothing was left to stop, else what
    was stopped."""
    from harness.hosts.ssh import SshError, SshHost  # ssh imports this module
    try:
        rec = json.loads(path.read_text())
        if owner_alive(rec["owner"]):
            return ""
        said = "-"
        if "pid" in rec:
            if rec.get("start") is not None and start_ticks(rec["pid"]) == rec["start"]:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(rec["pid"], signal.SIGKILL)
                    said = f"session {rec['pid']} ({rec.get('command', '?')}), left running by a killed harness"
        elif "ssh" in rec:
            host = SshHost.from_descriptor(rec["ssh"])
            if host.label not in silent:
                silent[host.label] = host.unanswered()
            if silent[host.label]:
                return ""   # kept for the next gc
            if host.stop_session(rec["tag"]):
                said = f"session of {rec.get('command', '?')} on {host.label}, left running by a killed harness"
    except (OSError, ValueError, KeyError, TypeError, SshError):
        return ""   # being written, gone already, or not a record of ours: left alone
    path.unlink(missing_ok=True)
    return said
