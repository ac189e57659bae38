"""Placement of a fleet over several hosts, and the [[hosts]] config that drives it."""
import pytest

from harness.common.schema import ConfigError
from harness.engine import settings
from harness.hosts import from_descriptor
from harness.hosts.placement import PlacementError, place
from harness.hosts.ssh import SshHost
from harness.libvirt.libvirt_conn import _for_openssh
from harness.measure.pipeline import combine_conditions


def test_round_robin_spreads_the_first_vms():
    assert place(4, [("a", None), ("b", None)]) == ["a", "b", "a", "b"]
    assert place(3, [("a", None), ("b", None)]) == ["a", "b", "a"]
    assert place(1, [("a", None), ("b", None)]) == ["a"]


def test_fixed_counts_and_the_rest():
    assert place(4, [("a", 3), ("b", None)]) == ["a", "b", "a", "a"]
    assert place(2, [("a", 1), ("b", 1)]) == ["a", "b"]


@pytest.mark.parametrize("total,hosts", [(2, [("a", 3), ("b", None)]), (4, [("a", 1), ("b", 1)])])
def test_counts_that_do_not_add_up_are_refused(total, hosts):
    with pytest.raises(PlacementError, match="add up"):
        place(total, hosts)


def _load(tmp_path, hosts: str, *overrides: str):
    path = tmp_path / "h.toml"
    path.write_text(f'state_dir = "{tmp_path}"\n' + hosts)
    return settings.load(path, list(overrides))


HOST = '[[hosts]]\nname = "{name}"\nssh = "root@h"\ndevices = {devices}\n{extra}\n'


def test_hosts_config_errors_name_the_field(tmp_path):
    with pytest.raises(ConfigError, match="identity"):
        _load(tmp_path, HOST.format(name="a", devices='["/dev/x"]', extra=f'identity = "{tmp_path}/missing"'))
    with pytest.raises(ConfigError, match="used twice"):
        _load(tmp_path, HOST.format(name="a", devices='["/dev/x"]', extra="") * 2)
    with pytest.raises(ConfigError, match="add up"):
        _load(tmp_path, HOST.format(name="a", devices='["/dev/x"]', extra="vms = 1")
              + HOST.format(name="b", devices='["/dev/y"]', extra="vms = 1"), "fleet.vms=4")
    with pytest.raises(ConfigError, match="devices"):
        _load(tmp_path, HOST.format(name="a", devices="[]", extra=""))
    cfg = _load(tmp_path, HOST.format(name="a", devices='["/dev/x"]', extra="")
                + HOST.format(name="b", devices='["/dev/y"]', extra=""), "fleet.vms=3")
    assert [h.name for h in cfg.hosts] == ["a", "b"]


def test_ssh_host_uri_and_descriptor(tmp_path):
    h = SshHost("n0", "root@127.0.0.1", 2222, identity="/k/id", known_hosts="/k/known", devices=("/dev/nvme0n1",))
    assert h.uri == "qemu+ssh://root@127.0.0.1:2222/system?keyfile=/k/id&knownhosts=/k/known&sshauth=privkey"
    assert from_descriptor(h.descriptor()) == h
    assert h.drives == ("/dev/nvme0n1",)
    assert ["-p", "2222"] == h.ssh_options()[h.ssh_options().index("-p"):][:2]
    assert "BatchMode=yes" in h.ssh_options() and "StrictHostKeyChecking=yes" in h.ssh_options()


def test_libvirt_gets_the_known_hosts_through_an_ssh_wrapper(monkeypatch, tmp_path):
    monkeypatch.setattr("harness.common.paths.CACHE", tmp_path)
    uri = _for_openssh("qemu+ssh://root@127.0.0.1:2222/system?keyfile=/k/id&knownhosts=/k/known&sshauth=privkey")
    assert "knownhosts" not in uri and "sshauth" not in uri and "keyfile=/k/id" in uri
    wrapper = uri.split("command=")[1]
    assert "UserKnownHostsFile=/k/known" in open(wrapper).read()


def test_libvirt_ssh_is_bounded_without_known_hosts_too(monkeypatch, tmp_path):
    """A qemu+ssh host that does not answer must fail the connection, not hang it."""
    monkeypatch.setattr("harness.common.paths.CACHE", tmp_path)
    script = open(_for_openssh("qemu+ssh://root@127.0.0.1:2222/system?keyfile=/k/id").split("command=")[1]).read()
    assert "ConnectTimeout=" in script and "ServerAliveInterval=" in script and "BatchMode=yes" in script


def test_conditions_over_hosts_add_cpu_and_keep_the_worst():
    a = {"host_busy_pct": 10.0, "qemu_cpu_s": 1.0, "suspended_vms": 1, "settle_timed_out": False,
         "host_quiet": True, "quiet_reason": ""}
    b = {"host_busy_pct": 40.0, "qemu_cpu_s": 2.0, "suspended_vms": 0, "settle_timed_out": True,
         "host_quiet": False, "quiet_reason": "busy"}
    c = combine_conditions({"h0": a, "h1": b})
    assert c["host_busy_pct"] == 40.0 and c["qemu_cpu_s"] == 3.0 and c["suspended_vms"] == 1
    assert c["settle_timed_out"] is True and c["host_quiet"] is False and c["quiet_reason"] == "h1: busy"
    assert c["host_conditions"]["h0"] is a


def test_nested_hosts_get_vcpus_that_fit_the_machine_unless_set(monkeypatch):
    """Under TCG a host whose vCPU waits for a core stalls its other vCPUs: N hosts share the cores."""
    from harness.engine import settings
    from harness.resources import nested_l1
    monkeypatch.setattr(nested_l1.os, "cpu_count", lambda: 2)
    default, chosen = settings.load(None, []).nested_place, settings.load(None, ["nested.vcpus=2"]).nested_place
    assert nested_l1._vcpus_that_fit(default, 2).nested.vcpus == 1
    assert nested_l1._vcpus_that_fit(default, 1).nested.vcpus == 2
    assert nested_l1._vcpus_that_fit(chosen, 2).nested.vcpus == 2   # the user's choice


def test_default_disks_follow_a_small_host_drive_and_a_set_size_is_kept(tmp_path, monkeypatch):
    """A nested host's 320 MiB drives hold the defaults' 4 VMs: each gets 80 MiB, unless the user set the size."""
    import dataclasses
    import subprocess

    from harness.engine import settings
    from harness.fleet import testbed
    from harness.hosts import LocalHost

    @dataclasses.dataclass(frozen=True)
    class SmallDriveHost(LocalHost):
        drives: tuple[str, ...] = ("/dev/nvme0n1",)

        def run(self, argv, **kw):
            assert argv == ["blockdev", "--getsize64", "/dev/nvme0n1"]
            return subprocess.CompletedProcess(argv, 0, str(320 << 20).encode(), b"")
    monkeypatch.setattr(testbed, "step", lambda msg: None)
    bed = testbed.Testbed(settings.load(None, [f"state_dir={tmp_path}", "fleet.vms=4"]), host=SmallDriveHost())
    bed._fit_to_drive()
    assert bed.cfg.fleet.disk_size_mib == 80 and bed.plan().vms[3].offset == 3 * 80 << 20
    chosen = testbed.Testbed(settings.load(None, [f"state_dir={tmp_path}", "fleet.vms=4", "fleet.disk_size_mib=256"]),
                             host=SmallDriveHost())
    chosen._fit_to_drive()
    assert chosen.cfg.fleet.disk_size_mib == 256   # the user's choice: preflight refuses it with the numbers
