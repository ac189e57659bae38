"""Commands vtb runs in sessions of their own (so that a timeout or Ctrl-C stops their whole tree)
outlive a harness killed with SIGKILL: a terraform apply holding its state lock, a host-side fio,
a command on an ssh host. Each is recorded while it runs (its session's pid and start time, and
its owner's), so that gc stops exactly those whose owner is gone, and nothing else."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import uuid
from pathlib import Path

from harness.store import _start_ticks, owner, owner_alive

RECORDS = Path(os.environ.get("VTB_RUN_DIR", "/run/vtb")) / "sessions"


@contextlib.contextmanager
def recorded(**what):
    """A record of one running command (`pid` for a local session, or `ssh` and `tag` for one on an
    ssh host), removed when it ends. Where records cannot be written (not root), none is kept."""
    path = RECORDS / f"{os.getpid()}-{uuid.uuid4().hex[:12]}.json"
    if "pid" in what:
        what["start"] = _start_ticks(what["pid"])
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


def stop_orphans() -> list[str]:
    """Stops the recorded sessions whose harness is gone (SIGKILL to a local session, the ssh host's
    own stop for a remote one); says what it stopped. Records of live harnesses are kept."""
    from harness.hosts.ssh import SshHost   # ssh imports this module
    stopped = []
    for path in sorted(RECORDS.glob("*.json")) if RECORDS.is_dir() else []:
        try:
            rec = json.loads(path.read_text())
        except (OSError, ValueError):
            continue   # being written, or already gone
        if owner_alive(rec["owner"]):
            continue
        if "pid" in rec and rec.get("start") is not None and _start_ticks(rec["pid"]) == rec["start"]:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(rec["pid"], signal.SIGKILL)
                stopped.append(f"session {rec['pid']} ({rec.get('command', '?')}), left running by a killed harness")
        elif "ssh" in rec:
            host = SshHost.from_descriptor(rec["ssh"])
            if host.stop_session(rec["tag"]):
                stopped.append(f"session of {rec.get('command', '?')} on {host.label}, left running by a killed harness")
        path.unlink(missing_ok=True)
    return stopped
