"""One process-wide signal that the run is being stopped (Ctrl-C, SIGTERM, or a failed sibling
in a parallel step), or that the running point is (its storage failed under it), so that every
node's running command is stopped at once, not waited for."""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

from harness.common.exits import StepFailed

CANCEL = threading.Event()


class Cancelled(StepFailed):
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


def interrupt_in(e: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C (or SIGTERM) behind an error, when a cleanup's own error (a command stopped
    because the run is being stopped) took its place as the exception being raised."""
    seen: set[int] = set()
    cause: BaseException | None = e
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None


@contextmanager
def lowered() -> Iterator[None]:
    """The stop signal lowered while a teardown runs (its commands must run to leave nothing
    behind; a second Ctrl-C still stops them), and raised again after it."""
    was = CANCEL.is_set()
    CANCEL.clear()
    try:
        yield
    finally:
        if was:
            CANCEL.set()
