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
from harness.common.exits import StepFailed
from harness.hosts import scopes, sessions

POLL_S = 0.25
STOP_GRACE_S = 30   # after SIGTERM, for runners' traps (stop a database server, unmount, detach a loop)
KILLED_WAIT_S = 10  # after SIGKILL, for the pipes to close


class Stopped(StepFailed):
    """A command stopped because its `stop_when` gave this reason; what it printed is kept."""

    def __init__(self, reason: str, stdout: bytes, stderr: bytes):
        super().__init__(reason)
        self.stdout, self.stderr = stdout, stderr


@dataclass(frozen=True)
class LocalHost:
    kind: ClassVar[str] = "local"
    is_this_machine: ClassVar[bool] = True
    confines_tools: ClassVar[bool] = True
    start_lead_s: ClassVar[float] = 0.5   # a process started here: no round trip
    drives_are_users: ClassVar[bool] = False
    drive_size_field: ClassVar[str | None] = None
    keeps_guest_image: ClassVar[bool] = False
    no_restore: ClassVar[str | None] = None
    rebuildable: ClassVar[bool] = False
    installs_packages: ClassVar[bool] = True
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
        scope = scopes.Scope.open()
        try:
            proc = subprocess.Popen(scope.wrap(argv) if scope else argv, env=env,
                                    stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
            with sessions.recorded(pid=proc.pid, command=os.path.basename(argv[0])):   # for gc, after a SIGKILL here
                return self._wait(proc, scope, argv, input, timeout, check, stop_when, check_every_s)
        finally:
            if scope:
                scope.close()   # what the command left running (a daemon it started) goes with it

    def _wait(self, proc: subprocess.Popen, scope: scopes.Scope | None, argv: list[str], input: bytes | None,
              timeout: float | None, check: bool,
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
                    _stop(proc, scope)
                    raise Cancelled(f"{argv[0]} on {self.label}: stopped, the run is being stopped")
                if deadline is not None and time.monotonic() > deadline:
                    out, err = _stop(proc, scope)
                    raise subprocess.TimeoutExpired(argv, timeout, out, err)
                if stop_when is not None and time.monotonic() >= next_check:
                    if reason := stop_when():
                        out, err = _stop(proc, scope)
                        raise Stopped(reason, out, err)
                    next_check = time.monotonic() + check_every_s
        except BaseException:
            if proc.poll() is None:
                _stop(proc, scope)  # Ctrl-C: the group is not in the terminal's, so it is stopped here
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


def _stop(proc: subprocess.Popen, scope: scopes.Scope | None) -> tuple[bytes, bytes]:
    """SIGTERM to the process group and to everything in the command's scope, SIGKILL to all of it
    after the grace; returns what it printed. Every wait is bounded: a process outside the scope
    that holds the pipes open is left, and what was read is returned."""
    for sig, wait in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, KILLED_WAIT_S)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        if scope:
            scope.signal(sig) if sig == signal.SIGTERM else scope.kill()
        try:
            return proc.communicate(timeout=wait)
        except subprocess.TimeoutExpired as e:
            said = (e.stdout or b"", e.stderr or b"")
    for pipe in (proc.stdout, proc.stderr):
        if pipe:
            pipe.close()
    return said


HOST = LocalHost
