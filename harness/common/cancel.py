"""One process-wide signal that the run is being stopped (Ctrl-C, SIGTERM, or a failed sibling
in a parallel step), or that the running point is (its storage failed under it), so that every
node's running command is stopped at once, not waited for."""
from __future__ import annotations

import threading

CANCEL = threading.Event()


class Cancelled(RuntimeError):
    """A node's command was stopped because the run is being stopped."""


class Terminated(KeyboardInterrupt):
    """SIGTERM (a CI timeout, `kill`): stops the run like Ctrl-C, and exits with 143, not 130."""


_why: list[str] = []


def abort_point(reason: str) -> None:
    """Stops the running point's commands everywhere, for `reason` (kept for its record)."""
    _why[:] = [reason]
    CANCEL.set()


def point_aborted() -> str:
    """Why the running point was stopped ("" when it was not)."""
    return _why[0] if _why else ""


def point_done() -> None:
    """The next point starts afresh."""
    if _why:
        _why.clear()
        CANCEL.clear()
