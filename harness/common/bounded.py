"""Calls that may block without end (libvirt's, which take no timeout) run where they can be
abandoned: in a daemon thread the caller waits for within a bound. A call still running after
10 s is announced, with a heartbeat until it returns or its bound passes; then the caller gets
Unanswered, naming what was awaited, for how long, and why it may not answer."""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator, TypeVar

from harness.common.console import step

ANNOUNCE_AFTER_S = 10      # a wait longer than this says what it waits for ...
HEARTBEAT_S = 30           # ... and again this often while it lasts
SLOWEST_WRITE_MIB_S = 5    # a bound on writing fresh data assumes no slower a disk than this (shared, noisy)


def write_bound_s(nbytes: int) -> float:
    """A bound for writing `nbytes` of prefill (dd from /dev/urandom): a minute, plus the bytes at
    the slowest disk vtb expects."""
    return 60 + nbytes / (SLOWEST_WRITE_MIB_S << 20)

T = TypeVar("T")


class Unanswered(TimeoutError):
    """A bounded call did not return in time; it goes on in a thread left behind. `guest` names the
    guest it concerned, when one did (the run restarts it)."""

    def __init__(self, message: str, guest: str = ""):
        super().__init__(message)
        self.guest = guest


def call(fn: Callable[[], T], what: str, within_s: float, why: str = "", guest: str = "",
         error: type[Unanswered] = Unanswered) -> T:
    """fn(), or `error` (Unanswered) after within_s seconds ("<what> did not return within N s: <why>").
    fn's own exceptions reach the caller as they are."""
    result: list = []
    failure: list[BaseException] = []

    def work() -> None:
        try:
            result.append(fn())
        except BaseException as e:  # handed to the caller's thread
            failure.append(e)
    worker = threading.Thread(target=work, name=f"bounded: {what}", daemon=True)
    worker.start()
    with heartbeat(what, within_s):
        worker.join(within_s)
    if failure:
        raise failure[0]
    if result:
        return result[0]
    raise error(f"{what} did not return within {within_s:g} s" + (f": {why}" if why else ""), guest)


@contextmanager
def heartbeat(what: str, bound_s: float | None = None, after_s: float | None = None) -> Iterator[None]:
    """Says what the block waits for once it has waited after_s (ANNOUNCE_AFTER_S), then every HEARTBEAT_S."""
    done = threading.Event()
    t0 = time.monotonic()
    limit = f" of at most {bound_s:g} s" if bound_s else ""

    def beat() -> None:
        wait = ANNOUNCE_AFTER_S if after_s is None else after_s
        while not done.wait(wait):
            step(f"    waiting for {what} ({time.monotonic() - t0:.0f} s{limit})")
            wait = HEARTBEAT_S
    beater = threading.Thread(target=beat, name=f"heartbeat: {what}", daemon=True)
    beater.start()
    try:
        yield
    finally:
        done.set()

