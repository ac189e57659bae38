"""The iscsi backend: its QEMU command line, and a real tgtd exporting the fleet's device as one LUN,
each VM's slice written through QEMU's own initiator (qemu-io over libiscsi), on this machine (no VM)."""
import shutil
import socket
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness import backends
from harness.backends import HostDevice, HostPlan, VmSlot
from harness.backends.iscsi import CONTROL_SOCKETS, chap_file, pid_file, ports, target_name
from harness.config import core as config
from harness.hosts import LocalHost
from harness.libvirt.libvirt_xml import QEMU_NS

MIB = 1 << 20


def plan(tmp_path, device: HostDevice, prefix: str = "vtb-x", **disk) -> HostPlan:
    d = config.DiskConfig(backend="iscsi", **disk).model_dump()
    return HostPlan(prefix=prefix, fleet_dir=str(tmp_path), disk=d, device=device,
                    vms=[VmSlot(0, f"{prefix}-vm0", 0, 4 * MIB), VmSlot(1, f"{prefix}-vm1", 4 * MIB, 4 * MIB)])


def test_the_disk_is_qemus_initiator_on_the_fleets_lun_sliced_under_virtio_blk(tmp_path):
    p = plan(tmp_path, HostDevice(path="/dev/loop7", kind="block"), cache="none", num_queues=2,
             iothreads=0)
    a = backends.get("iscsi").attach(p, p.vms[1])
    root = ET.fromstring(f"<domain xmlns:qemu='{QEMU_NS}'>{a.domain_xml}</domain>")
    args = [e.get("value") for e in root.iter(f"{{{QEMU_NS}}}arg")]
    portal = ports(p)[0]
    assert args[:4] == ["-object", f"secret,id=vtbdata-chap,file={tmp_path}/vtb-x-run/chap.secret",
                        "-blockdev", f"driver=iscsi,node-name=vtbdata-iscsi,transport=tcp,portal=127.0.0.1:{portal},"
                                     f"target=iqn.2026-11.org.vtb:vtb-x,lun=1,user=vtb,password-secret=vtbdata-chap,"
                                     "initiator-name=iqn.2026-11.org.vtb:vtb-x:vtb-x-vm1,cache.direct=on"]
    assert args[4:6] == ["-blockdev", f"driver=raw,node-name=vtbdata,file=vtbdata-iscsi,offset={4 * MIB},size={4 * MIB}"]
    assert args[-2:] == ["-device", "virtio-blk-pci,drive=vtbdata,serial=vtb-data,num-queues=2,bus=pci.0,addr=0x10"]


def test_ports_are_the_fleets_own():
    a, b = (ports(plan("/x", HostDevice(path="/d", kind="block"), prefix=n)) for n in ("vtb-a", "vtb-b"))
    assert a != b and all(13260 <= p < 15260 for p in (*a, *b))


@pytest.mark.skipif(shutil.which("tgtd") is None, reason="tgt is installed by `make test` (scripts/host-packages.sh)")
def test_each_vm_writes_its_own_slice_of_the_lun_and_the_target_goes(tmp_path):
    """The real tgtd, started and stopped through the host node; a write through each VM's initiator
    lands in that VM's slice of the device, and nowhere else; nothing of tgt remains."""
    device = tmp_path / "device.raw"
    device.write_bytes(b"\0" * (8 * MIB))
    p = plan(tmp_path, HostDevice(path=str(device), kind="block"), prefix="vtb-unit-iscsi")
    iscsi, host = backends.get("iscsi"), LocalHost()
    assert iscsi.preflight(host, p) is None
    iscsi.host_up(host, p)
    try:
        iscsi.host_up(host, p)   # idempotent: the running target is kept
        secret = chap_file(p)
        assert oct(secret.stat().st_mode & 0o777) == "0o600" and secret.stat().st_uid == 0
        for vm, pattern in zip(p.vms, ("0xab", "0xcd")):
            opts = (f"driver=raw,offset={vm.offset},size={vm.size},file.driver=iscsi,file.transport=tcp,"
                    f"file.portal=127.0.0.1:{ports(p)[0]},file.target={target_name(p)},file.lun=1,"
                    f"file.initiator-name={target_name(p)}:{vm.name}")
            stranger = subprocess.run(["qemu-io", "--image-opts", opts, "-c", "read 0 4k"],
                                      capture_output=True, text=True, timeout=60)
            assert stranger.returncode != 0, stranger.stdout   # no CHAP: not let in
            out = subprocess.run(["qemu-io", "--object", f"secret,id=chap,file={secret}", "--image-opts",
                                  f"{opts},file.user=vtb,file.password-secret=chap",
                                  "-c", f"write -P {pattern} 0 4k", "-c", "length"],
                                 capture_output=True, text=True, timeout=60)
            assert out.returncode == 0 and "4 MiB" in out.stdout, out.stdout + out.stderr
    finally:
        iscsi.host_down(host, p)
    data = device.read_bytes()
    assert data[:4096] == b"\xab" * 4096 and data[4 * MIB:4 * MIB + 4096] == b"\xcd" * 4096
    assert data[4096:4 * MIB] == b"\0" * (4 * MIB - 4096)
    control = ports(p)[1]
    assert not pid_file(p).exists() and not chap_file(p).exists()
    assert not list((tmp_path.parent / CONTROL_SOCKETS).glob(f"socket.{control}*"))
    assert subprocess.run(["pgrep", "-f", f"tgtd -C {control}"]).returncode == 1


def test_a_portal_port_in_use_is_refused(tmp_path):
    p = plan(tmp_path, HostDevice(path="/dev/loop7", kind="block"), prefix="vtb-unit-busy")
    if shutil.which("tgtd") is None:
        pytest.skip("tgt is installed by `make test` (scripts/host-packages.sh)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", ports(p)[0]))
        s.listen()
        reason = backends.get("iscsi").preflight(LocalHost(), p)
    assert f"TCP port {ports(p)[0]} is in use" in reason and "fleet.name" in reason


@pytest.mark.skipif(shutil.which("tgtd") is None, reason="tgt is installed by `make test` (scripts/host-packages.sh)")
def test_a_target_killed_with_sigkill_leaves_a_socket_the_next_one_takes_over(tmp_path):
    """A SIGKILLed tgtd leaves its control socket; preflight does not take it for another tgtd, the
    next target starts on it, and the teardown removes it."""
    device = tmp_path / "device.raw"
    device.write_bytes(b"\0" * (8 * MIB))
    p = plan(tmp_path, HostDevice(path=str(device), kind="block"), prefix="vtb-unit-iscsi-kill")
    iscsi, host = backends.get("iscsi"), LocalHost()
    control = CONTROL_SOCKETS + f"/socket.{ports(p)[1]}"
    iscsi.host_up(host, p)
    try:
        subprocess.run(["pkill", "-KILL", "-f", f"tgtd -C {ports(p)[1]}"], check=True)
        subprocess.run(["sh", "-c", f"while pgrep -f '^tgtd -C {ports(p)[1]} '; do sleep 0.1; done"], timeout=10)
        assert Path(control).exists()   # what the kill left
        assert iscsi.preflight(host, p) is None
        iscsi.host_up(host, p)
        assert subprocess.run(["pgrep", "-f", f"tgtd -C {ports(p)[1]}"]).returncode == 0
    finally:
        iscsi.host_down(host, p)
    assert not Path(control).exists() and subprocess.run(["pgrep", "-f", f"tgtd -C {ports(p)[1]}"]).returncode == 1


@pytest.mark.skipif(shutil.which("tgtd") is None, reason="tgt is installed by `make test` (scripts/host-packages.sh)")
def test_a_tgtd_whose_pid_file_comes_too_late_is_stopped_not_left_running(tmp_path, monkeypatch):
    """Its pid file later than the bound (a loaded host): the start fails, and the tgtd that answered
    on the fleet's control port, unproven, is stopped through tgt's own control."""
    from harness.backends import iscsi as iscsi_module
    from harness.common.exits import StepFailed
    device = tmp_path / "device.raw"
    device.write_bytes(b"\0" * (8 * MIB))
    p = plan(tmp_path, HostDevice(path=str(device), kind="block"), prefix="vtb-unit-iscsi-late")

    def too_late(host, pidfile, what, within_s=10):
        raise StepFailed(f"{what} on {host.label} wrote no pid file of a running process at {pidfile}")
    monkeypatch.setattr(iscsi_module, "record_daemon", too_late)
    running = ["pgrep", "-f", f"^tgtd -C {ports(p)[1]} "]
    try:
        with pytest.raises(StepFailed, match="wrote no pid file"):
            backends.get("iscsi").host_up(LocalHost(), p)
        subprocess.run(["sh", "-c", f"while {' '.join(running[:2])} '{running[2]}' >/dev/null; do sleep 0.1; done"],
                       timeout=30)
        assert subprocess.run(running, capture_output=True).returncode == 1
    finally:
        subprocess.run(["pkill", "-KILL", "-f", running[2]])
