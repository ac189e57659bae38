"""This machine as the testbed host."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, ClassVar

from harness.common import paths
from harness.common.cancel import CANCEL, Cancelled
from harness.hosts import sessions

POLL_S = 0.25
STOP_GRACE_S = 30   # after SIGTERM, for runners' traps (stop a database server, unmount, detach a loop)


class Stopped(RuntimeError):
    """A command stopped because its `stop_when` gave this reason; what it printed is kept."""

    def __init__(self, reason: str, stdout: bytes, stderr: bytes):
        super().__init__(reason)
        self.stdout, self.stderr = stdout, stderr


@dataclass(frozen=True)
class LocalHost:
    kind: ClassVar[str] = "local"
    is_this_machine: ClassVar[bool] = True
    drives_are_users: ClassVar[bool] = False
    drive_size_field: ClassVar[str | None] = None
    keeps_guest_image: ClassVar[bool] = False
    no_restore: ClassVar[str | None] = None
    rebuildable: ClassVar[bool] = False
    uri: str = paths.LIBVIRT_URI
    name: str = "local"
    label: str = "this machine"
    drives: tuple[str, ...] = ()
    l0_accel: str = "n/a"

    def run(self, argv: list[str], *, env: dict | None = None, input: bytes | None = None,
            timeout: float | None = None, check: bool = True,
            stop_when: Callable[[], str | None] | None = None, check_every_s: float = 30.0) -> subprocess.CompletedProcess:
        """As subprocess.run, in its own process group, which is stopped (SIGTERM, then SIGKILL after
        a grace) on timeout, on Ctrl-C, when the run is cancelled from another thread, and when
        `stop_when` (asked every check_every_s) gives a reason: then it raises Stopped."""
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        with sessions.recorded(pid=proc.pid, command=os.path.basename(argv[0])):   # for gc, after a SIGKILL here
            return self._wait(proc, argv, input, timeout, check, stop_when, check_every_s)

    def _wait(self, proc: subprocess.Popen, argv: list[str], input: bytes | None, timeout: float | None, check: bool,
              stop_when: Callable[[], str | None] | None, check_every_s: float) -> subprocess.CompletedProcess:
        deadline = None if timeout is None else time.monotonic() + timeout
        next_check = time.monotonic() + check_every_s
        pending = input
        try:
            while True:
                try:
                    out, err = proc.communicate(pending, timeout=POLL_S)
                    break
                except subprocess.TimeoutExpired:
                    pending = None  # sent on the first call
                if CANCEL.is_set():
                    _stop(proc)
                    raise Cancelled(f"{argv[0]} on {self.label}: stopped, the run is being stopped")
                if deadline is not None and time.monotonic() > deadline:
                    out, err = _stop(proc)
                    raise subprocess.TimeoutExpired(argv, timeout, out, err)
                if stop_when is not None and time.monotonic() >= next_check:
                    if reason := stop_when():
                        out, err = _stop(proc)
                        raise Stopped(reason, out, err)
                    next_check = time.monotonic() + check_every_s
        except BaseException:
            if proc.poll() is None:
                _stop(proc)  # Ctrl-C: the group is not in the terminal's, so it is stopped here
            raise
        done = subprocess.CompletedProcess(argv, proc.returncode, out, err)
        if check:
            done.check_returncode()
        return done

    def clock_offset_s(self) -> float:
        return 0.0  # this machine's clock is the reference

    def descriptor(self) -> dict:
        return {"kind": self.kind, "uri": self.uri}

    @classmethod
    def from_descriptor(cls, d: dict) -> "LocalHost":
        return cls(uri=d["uri"])

    def fleet_dir(self, local: Path, fleet: str) -> Path:
        return local

    def diagnostics(self) -> dict[str, str]:
        return {}  # this machine's logs stay where they are

    def stopped(self) -> str | None:
        return None  # this machine is running this code


def _stop(proc: subprocess.Popen) -> tuple[bytes, bytes]:
    """SIGTERM to the process group, SIGKILL after the grace; returns what it printed."""
    for sig, wait in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            return proc.communicate(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
    return b"", b""


HOST = LocalHost
