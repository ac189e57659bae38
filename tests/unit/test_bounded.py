"""Bounded calls: a call that never returns is abandoned at its bound, named, and announced while it waits."""
import threading
import time

import pytest

from harness import bounded


def test_a_call_that_returns_gives_its_value_and_its_errors():
    assert bounded.call(lambda: 7, "seven", 5) == 7
    with pytest.raises(KeyError):
        bounded.call(lambda: {}["x"], "a lookup", 5)


def test_a_call_that_never_returns_is_abandoned_at_its_bound_with_what_and_why():
    never = threading.Event()
    t0 = time.monotonic()
    with pytest.raises(bounded.Unanswered) as e:
        bounded.call(never.wait, "suspend of vtb-x-vm0", 0.3, "its QEMU is not answering its monitor", guest="vtb-x-vm0")
    assert time.monotonic() - t0 < 2
    assert str(e.value) == "suspend of vtb-x-vm0 did not return within 0.3 s: its QEMU is not answering its monitor"
    assert e.value.guest == "vtb-x-vm0" and isinstance(e.value, TimeoutError)
    never.set()


def test_a_long_wait_says_what_it_waits_for(monkeypatch):
    said = []
    monkeypatch.setattr(bounded, "step", said.append)
    monkeypatch.setattr(bounded, "ANNOUNCE_AFTER_S", 0.05)
    monkeypatch.setattr(bounded, "HEARTBEAT_S", 0.05)
    bounded.call(lambda: time.sleep(0.3), "the cluster", 5)
    assert len(said) >= 2 and all("waiting for the cluster" in s and "of at most 5 s" in s for s in said)
