"""The nbd backend: its QEMU command line, and the real qemu-storage-daemon serving each VM's slice
over NBD, written through QEMU's own NBD client (qemu-io), on this machine (no VM)."""
import socket
import subprocess
import xml.etree.ElementTree as ET

from harness import backends
from harness.backends import HostDevice, HostPlan, VmSlot
from harness.backends.base import listening
from harness.backends.nbd import pid_file, socket_path
from harness.config import core as config
from harness.hosts import LocalHost
from harness.libvirt.libvirt_xml import QEMU_NS

MIB = 1 << 20


def plan(tmp_path, device: HostDevice, **disk) -> HostPlan:
    d = config.DiskConfig(backend="nbd", **disk).model_dump()
    return HostPlan(prefix="vtb-x", fleet_dir=str(tmp_path), disk=d, device=device,
                    vms=[VmSlot(0, "vtb-x-vm0", 0, 4 * MIB), VmSlot(1, "vtb-x-vm1", 4 * MIB, 4 * MIB)])


def test_the_disk_is_qemus_nbd_client_on_the_vms_socket_under_virtio_blk(tmp_path):
    p = plan(tmp_path, HostDevice(path="/dev/loop7", kind="block"), iothreads=1, num_queues=2)
    a = backends.get("nbd").attach(p, p.vms[1])
    root = ET.fromstring(f"<domain xmlns:qemu='{QEMU_NS}'>{a.domain_xml}</domain>")
    args = [e.get("value") for e in root.iter(f"{{{QEMU_NS}}}arg")]
    assert args[:2] == ["-blockdev", f"driver=nbd,node-name=vtbdata,server.type=unix,"
                                     f"server.path={tmp_path}/vtb-x-run/vtb-x-vm1.nbd.sock,export=data"]
    assert args[-2:] == ["-device", "virtio-blk-pci,drive=vtbdata,serial=vtb-data,num-queues=2,iothread=vtbio0,"
                                    "bus=pci.0,addr=0x10"]
    assert a.locator == "serial:vtb-data"


def test_each_vm_reads_and_writes_its_own_slice_over_nbd(tmp_path):
    """The real daemons, started and stopped through the host node; a write through each VM's export
    lands in that VM's slice of the device, and nowhere else."""
    device = tmp_path / "device.raw"
    device.write_bytes(b"\0" * (8 * MIB))
    p = plan(tmp_path, HostDevice(path=str(device), kind="block"))
    nbd, host = backends.get("nbd"), LocalHost()
    assert nbd.preflight(host, p) is None
    nbd.host_up(host, p)
    try:
        assert all(listening(host, socket_path(p, vm)) for vm in p.vms)
        nbd.host_up(host, p)   # idempotent: the running daemons are kept
        for vm, pattern in zip(p.vms, ("0xab", "0xcd")):
            url = f"nbd+unix:///data?socket={socket_path(p, vm)}"
            out = subprocess.run(["qemu-io", "-f", "raw", url, "-c", f"write -P {pattern} 0 4k", "-c", "length"],
                                 capture_output=True, text=True, timeout=60)
            assert out.returncode == 0 and "4 MiB" in out.stdout, out.stdout + out.stderr   # the slice, not the device
    finally:
        nbd.host_down(host, p)
    data = device.read_bytes()
    assert data[:4096] == b"\xab" * 4096 and data[4 * MIB:4 * MIB + 4096] == b"\xcd" * 4096
    assert data[4096:4 * MIB] == b"\0" * (4 * MIB - 4096)
    assert not any(pid_file(p, vm).exists() or socket_path(p, vm).exists() for vm in p.vms)
    assert subprocess.run(["pgrep", "-f", f"qemu-storage-daemon.*{tmp_path}"]).returncode == 1


def test_a_socket_someone_else_listens_on_is_refused(tmp_path):
    p = plan(tmp_path, HostDevice(path="/dev/loop7", kind="block"))
    p.run_dir.mkdir()
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(socket_path(p, p.vms[0])))
        s.listen()
        reason = backends.get("nbd").preflight(LocalHost(), p)
    assert "vtb-x-vm0.nbd.sock is already in use" in reason
