"""The commands a killed harness left running in sessions of their own (harness/hosts/sessions.py
records them): stopped by gc, on this machine or on the ssh host they run on, and nothing else."""
from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path

from harness.common.pids import owner_alive, start_ticks
from harness.hosts import scopes, sessions
from harness.hosts.ssh import SshError, SshHost


def stop_orphans(asked: dict[str, str | None] | None = None) -> list[str]:
    """Stops the recorded sessions whose harness is gone (SIGKILL to a local session's group, the
    ssh host's own stop for a remote one); says what it stopped. Records of live harnesses are
    kept, and so is one of a remote session its host did not answer for (the next gc tries again).
    `asked`: hosts' answers already known, by label (a dead host costs its timeout once in all).
    Passes until a pass stops nothing: a hook's harness outlives its terraform by a moment."""
    stopped: list[str] = []
    silent: dict[str, str | None] = dict(asked or {})   # each ssh host asked once
    for _ in range(3):
        done = [said for path in sessions.records() if (said := _stop(path, silent))]
        stopped += [s for s in done if s != "-"]
        if not done:
            break
    # what a killed run's commands started in other sessions (fio's jobs), by their scopes
    return stopped + [f"the processes of command scope {path}" for path in scopes.collect()]


def _stop(path: Path, silent: dict[str, str | None]) -> str:
    """One record: "" when its owner lives (kept), "-" when nothing was left to stop, else what
    was stopped."""
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
