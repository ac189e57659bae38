import pytest

from harness.hosts.accel import AccelError, decide


def test_tcg_requested_skips_the_probe():
    c = decide("tcg", None)
    assert (c.accel, c.domain_type) == ("tcg", "qemu")


def test_auto_uses_kvm_only_when_a_guest_booted():
    assert decide("auto", (True, "booted")).domain_type == "kvm"
    c = decide("auto", (False, "no kernel boot under KVM within 10 s"))
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


def test_the_probe_is_cached_per_boot_of_the_host_so_a_host_booted_anew_is_probed_anew(tmp_path, monkeypatch):
    """A nested host's L1 whose KVM locked up is booted anew: its failed probe must not outlive that boot."""
    import subprocess

    from harness.hosts import accel

    class Booted:
        is_this_machine = False
        boot = "boot-1"

        def run(self, argv, **kw):
            return subprocess.CompletedProcess(argv, 0, f"QEMU 7.2\n6.1.0\n{self.boot}\n".encode(), b"")

    probes = []
    monkeypatch.setattr(accel, "probe_kvm", lambda *a: probes.append(a) or (len(probes) > 1, "probe"))
    monkeypatch.setattr(accel, "CACHE_DIR", tmp_path / "cache")
    host = Booted()
    assert accel.choose("auto", tmp_path / "vmlinuz", host).accel == "tcg"
    assert accel.choose("auto", tmp_path / "vmlinuz", host).accel == "tcg"   # this boot's answer, kept
    host.boot = "boot-2"
    assert accel.choose("auto", tmp_path / "vmlinuz", host).accel == "kvm"
    assert len(probes) == 2


def test_two_views_of_one_host_share_its_probe(tmp_path, monkeypatch):
    """The L1 as a nested host and the same L1 driven over ssh (another descriptor, another state dir)
    boot the same kernel in the same boot: one probe answers both."""
    import subprocess

    from harness.hosts import accel

    class View:
        is_this_machine = False

        def __init__(self, kind):
            self.kind = kind

        def run(self, argv, **kw):
            return subprocess.CompletedProcess(argv, 0, b"QEMU 7.2\n6.1.0\nboot-1\nabc  /vmlinuz\n", b"")

    probes = []
    monkeypatch.setattr(accel, "probe_kvm", lambda *a: probes.append(a) or (True, "probe"))
    monkeypatch.setattr(accel, "CACHE_DIR", tmp_path / "cache")
    assert accel.choose("auto", tmp_path / "vmlinuz", View("nested")).accel == "kvm"
    assert accel.choose("auto", tmp_path / "vmlinuz", View("ssh")).accel == "kvm"
    assert len(probes) == 1
