"""Bounded calls: a call that never returns is abandoned at its bound, named, and announced while it waits."""
import threading
import time

import pytest

from harness.common import bounded


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


def test_a_libvirt_call_past_its_bound_is_handled_as_libvirts_own_failure():
    """Every place that handles a libvirtd gone (a libvirtError) handles one that stopped answering."""
    import libvirt

    from harness.libvirt import libvirt_conn
    never = threading.Event()
    with pytest.raises(libvirt.libvirtError) as e:
        bounded.call(never.wait, "create of vtb-x-vm0", 0.1, "why", guest="vtb-x-vm0", error=libvirt_conn.Unanswered)
    assert e.value.get_error_message() == "create of vtb-x-vm0 did not return within 0.1 s: why"
    assert isinstance(e.value, bounded.Unanswered) and e.value.guest == "vtb-x-vm0"
    never.set()
