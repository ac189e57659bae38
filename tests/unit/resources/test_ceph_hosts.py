"""Ceph's hosts mode refuses before making anything: a host without the tools, or without the
address the plan binds its node to, is named with the fix, and no command that changes a host
runs. The hosts answer with outputs recorded on a nested host."""
from __future__ import annotations

import subprocess

import pytest

from harness.resources.ceph import hosts
from harness.resources.ceph.bootstrap import CephError
from harness.resources.ceph.plan import CephPlan

# `ip -4 -o addr show` on nested host 0 (its shared-network NIC, then the user-mode one)
IP_ADDR = b"""1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever
2: eth0    inet 10.214.0.11/24 scope global eth0\\       valid_lft forever preferred_lft forever
3: eth1    inet 10.0.2.15/24 scope global eth1\\       valid_lft forever preferred_lft forever
"""


class RecordedHost:
    def __init__(self, name: str, missing: str = ""):
        self.name, self.label, self.missing, self.calls = name, f"host {name}", missing, []

    def run(self, argv, *, env=None, input=None, timeout=None, check=True):
        self.calls.append(argv)
        out = IP_ADDR if argv[:2] == ["ip", "-4"] else self.missing.encode() if argv[0] == "sh" else b""
        return subprocess.CompletedProcess(argv, 0, out, b"")


def test_a_host_without_the_tools_or_without_its_address_is_refused_and_nothing_runs(monkeypatch):
    made = {"h0": RecordedHost("h0"), "h1": RecordedHost("h1", missing="ceph-osd\n")}
    monkeypatch.setattr(hosts, "from_descriptor", lambda d: made[d["name"]])
    plan = CephPlan(name="vtb-ci-ceph", dir="/var/tmp/vtb/ci/vtb-ci-ceph", nodes=2,
                    hosts=({"name": "h0"}, {"name": "h1"}), addresses=("10.214.0.12", "10.214.0.11"))
    with pytest.raises(CephError) as e:
        hosts.create(plan)
    said = str(e.value)
    assert "nothing was made" in said
    assert "host h0 has no interface with the address 10.214.0.12" in said and "cluster_address" in said
    assert "ceph-osd missing on host h1" in said
    ran = [argv[0] for h in made.values() for argv in h.calls]
    assert set(ran) <= {"sh", "ip"}, ran   # only the checks: no mkdir, no daemon, no rm


def test_osds_too_small_for_the_fleet_are_refused_before_the_cluster_is_made_on_any_host(monkeypatch, tmp_path):
    from harness.config.core import Config
    from harness.fleet import multi_host
    from harness.fleet.testbed import TestbedError
    from harness.hosts import remote
    from harness.resources.ceph import fleet_store
    cfg = Config.model_validate({
        "state_dir": str(tmp_path), "disk": {"backend": "rbd"}, "fleet": {"vms": 2, "disk_size_mib": 512},
        "ceph": {"mode": "hosts", "nodes": 2, "osd_size_mib": 1024},
        "hosts": [{"name": f"h{i}", "ssh": f"root@10.214.0.1{i}", "devices": ["/dev/vdb"]} for i in range(2)]})
    monkeypatch.setattr(fleet_store.clusters, "create", lambda plan: pytest.fail("the cluster was made"))
    fleet = multi_host.MultiHostFleet(cfg, [remote(h) for h in cfg.hosts])
    with pytest.raises(TestbedError, match=r"ceph.osd_size_mib=1024 is too small.*Fix: set ceph.osd_size_mib >= \d+"):
        fleet.up()


@pytest.mark.parametrize("vms, parts", [(1, ["h0"]), (0, ["h0", "h1"])])
def test_a_fleet_of_no_vm_has_a_part_on_each_host_whose_image_holds_one_slice(tmp_path, vms, parts):
    """A sweep that measures the hosts only (ceph-scaling --pe-only) makes no VM: each host still
    has its image, one slice long, for its host clients; a fleet of VMs has parts where they run."""
    from harness.config.core import Config
    from harness.fleet import multi_host
    from harness.hosts import remote
    from harness.resources.ceph.plan import fleet_images
    cfg = Config.model_validate({
        "state_dir": str(tmp_path), "disk": {"backend": "rbd"}, "fleet": {"vms": 1, "disk_size_mib": 512},
        "ceph": {"mode": "hosts", "nodes": 2},
        "hosts": [{"name": f"h{i}", "ssh": f"root@10.214.0.1{i}", "devices": ["/dev/vdb"]} for i in range(2)]})
    cfg = cfg.model_copy(update={"fleet": cfg.fleet.model_copy(update={"vms": vms})})
    fleet = multi_host.MultiHostFleet(cfg, [remote(h) for h in cfg.hosts])
    assert [p.host.name for p in fleet.parts] == parts
    assert all(len(p.plan().vms) == vms and p.plan().device_bytes == 512 << 20 for p in fleet.parts)
    assert fleet_images(cfg.ceph_fleet) == {2: 512 * len(parts)}


class HostWithADevice(RecordedHost):
    """A host whose device gate (a python3 run there) says `reason`, whose /dev/vdb has `mib` MiB,
    and that has no cluster yet."""
    drives, is_this_machine = ("/dev/vdb",), False

    def __init__(self, name: str, reason: str = "", mib: int = 8192):
        super().__init__(name)
        self.reason, self.mib = reason, mib

    def run(self, argv, *, env=None, input=None, timeout=None, check=True):
        self.calls.append(argv)
        out = {"ip": IP_ADDR, "python3": self.reason.encode(), "blockdev": str(self.mib << 20).encode()}.get(argv[0], b"")
        return subprocess.CompletedProcess(argv, 1 if argv[0] == "cat" else 0, out, b"")


def test_an_osd_device_the_gate_refuses_or_too_small_is_named_and_no_daemon_is_made(monkeypatch):
    made = {"h0": HostWithADevice("h0", reason="it carries a ext4 signature (partition table or filesystem); "
                                              "set fleet.wipe=true only if its data may be destroyed"),
            "h1": HostWithADevice("h1", mib=2048)}
    monkeypatch.setattr(hosts, "from_descriptor", lambda d: made[d["name"]])
    plan = CephPlan(name="vtb-ci-ceph", dir="/var/tmp/vtb/ci/vtb-ci-ceph", nodes=2, osd_size_mib=3328,
                    hosts=({"name": "h0"}, {"name": "h1"}), addresses=("10.214.0.11", "10.214.0.11"),
                    osd_devices=("/dev/vdb", "/dev/vdb"))
    with pytest.raises(CephError) as e:
        hosts.create(plan)
    said = str(e.value)
    assert "nothing was made" in said and "host h0: osd.0's device /dev/vdb refused: it carries a ext4" in said
    assert "host h1: osd.1's device /dev/vdb has 2048 MiB, and each OSD needs 3328 MiB" in said and "Fix:" in said
    gate = next(argv for argv in made["h0"].calls if argv[0] == "python3")
    assert gate[-2:] == ['["/dev/vdb"]', "host h0's devices in [[hosts]]"]   # checked against that host's allowlist
    ran = {argv[0] for h in made.values() for argv in h.calls}
    assert not ran & {"mkdir", "ceph-mon", "ceph-osd", "ceph-authtool"}, ran


class ListeningHost(RecordedHost):
    """A host whose `ss -Hltn` shows another cluster's mon at 10.214.0.11, and its NIC's counters."""

    def run(self, argv, *, env=None, input=None, timeout=None, check=True):
        self.calls.append(argv)
        out = {"ss": b"LISTEN 0      512      10.214.0.11:3300      0.0.0.0:*\nLISTEN 0 128 0.0.0.0:22 0.0.0.0:*\n",
               "ip": IP_ADDR, "cat": b"1000\n2000\n" if "rx_bytes" in " ".join(argv) else b"-1\n"}[argv[0]]
        return subprocess.CompletedProcess(argv, 0, out, b"")


def test_a_mon_port_another_cluster_holds_is_refused_with_the_fix():
    plan = CephPlan(name="vtb-cs-ceph", dir="/var/tmp/vtb/cs/vtb-cs-ceph", nodes=1, hosts=({"name": "h0"},),
                    addresses=("10.214.0.11",))
    said = hosts._mon_port_problem(ListeningHost("h0"), plan)
    assert "port 3300 at 10.214.0.11 is taken" in said and "harness testbed down" in said
    free = CephPlan(name="vtb-cs-ceph", dir="/var/tmp/vtb/cs/vtb-cs-ceph", nodes=1, hosts=({"name": "h0"},),
                    addresses=("10.214.0.12",))
    assert hosts._mon_port_problem(ListeningHost("h0"), free) is None


def test_a_hosts_link_is_its_interface_with_the_nodes_address_and_a_speed_it_does_not_say_is_unknown():
    host = ListeningHost("h0")
    assert hosts._interface(host, "10.214.0.11") == "eth0"
    assert hosts._speed_mbit(host, "eth0") == 0   # virtio: -1
    assert hosts._counters(host, "eth0") == {"rx_bytes": 1000, "tx_bytes": 2000}
    with pytest.raises(CephError, match="no interface with the Ceph address 10.214.0.99"):
        hosts._interface(host, "10.214.0.99")
