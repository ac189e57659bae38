import pytest

from harness.hosts.accel import AccelError, decide


def test_tcg_requested_skips_the_probe():
    c = decide("tcg", None)
    assert (c.accel, c.domain_type) == ("tcg", "qemu")


def test_auto_uses_kvm_only_when_a_guest_booted():
    assert decide("auto", (True, "booted")).domain_type == "kvm"
    c = decide("auto", (False, "no kernel boot under KVM within 20 s"))
    assert (c.accel, c.domain_type) == ("tcg", "qemu") and "no kernel boot" in c.reason


def test_kvm_demanded_but_broken_is_an_error_with_a_fix():
    with pytest.raises(AccelError, match="fleet.accel=auto"):
        decide("kvm", (False, "QEMU with KVM failed"))
    assert decide("kvm", (True, "ok")).accel == "kvm"


def test_a_probe_that_failed_is_said_by_its_last_words_not_its_terminal_codes():
    """A quiet kernel that reached nothing leaves only QEMU's and the firmware's terminal control
    sequences on the console: they are not a reason."""
    from harness.hosts.accel import _last_words
    assert _last_words("\x1bc\x1b[?7l\x1b[2J") == ""
    assert _last_words("\x1b[2J[    1.0] VFS: Cannot open root device\n\x1bc") == "[    1.0] VFS: Cannot open root device"
