"""Each backend's domain XML and host-side checks, and a real storage daemon's life cycle on this
machine (no VM)."""
import socket
import subprocess
import xml.etree.ElementTree as ET

import pytest

from harness import backends
from harness.backends import HostDevice, HostPlan, VmSlot
from harness.config import core as config
from harness.hosts import LocalHost
from harness.libvirt.libvirt_xml import QEMU_NS

MIB = 1 << 20
FILE = HostDevice(path="/var/lib/vtb/x/pool/vtb-x-device.raw", kind="file", pool="vtb-x", volume="vtb-x-device.raw")
BLOCK = HostDevice(path="/dev/loop7", kind="block")


def plan(tmp_path, backend, device=FILE, **disk):
    d = config.DiskConfig(backend=backend, **disk).model_dump()
    return HostPlan(prefix="vtb-x", fleet_dir=str(tmp_path), disk=d, device=device,
                    vms=[VmSlot(0, "vtb-x-vm0", 0, 64 * MIB), VmSlot(1, "vtb-x-vm1", 64 * MIB, 64 * MIB)])


def parse(attachment):
    """The fragments as libvirt will see them once the XSLT has put them in place."""
    doc = f"<domain xmlns:qemu='{QEMU_NS}'><devices>{attachment.devices_xml}</devices>{attachment.domain_xml}</domain>"
    return ET.fromstring(doc)


def test_registry_has_every_backend():
    assert set(backends.all_backends()) == {"virtio-blk", "virtio-scsi", "vhost-user-blk-qsd", "vhost-user-blk-spdk",
                                            "nvme", "passthrough-block", "vfio", "null", "rbd", "nbd", "iscsi", "qcow2"}
    assert [n for n, b in backends.all_backends().items() if b.diagnostic] == ["null"]


def test_virtio_blk_slice_of_a_file_volume(tmp_path):
    p = plan(tmp_path, "virtio-blk", cache="none", aio="io_uring", iothreads=2, num_queues=4, queue_size=1024)
    root = parse(backends.get("virtio-blk").attach(p, p.vms[1]))
    disk = root.find("devices/disk")
    assert disk.get("type") == "volume" and disk.find("source").get("volume") == "vtb-x-device.raw"
    sl = disk.find("source/slices/slice")
    assert (sl.get("offset"), sl.get("size")) == (str(64 * MIB), str(64 * MIB))
    drv = disk.find("driver")
    assert (drv.get("cache"), drv.get("io"), drv.get("iothread"), drv.get("queues")) == ("none", "io_uring", "1", "4")
    assert drv.get("queue_size") == "1024"
    assert disk.find("target").get("bus") == "virtio" and disk.find("serial").text == "vtb-data"
    assert root.find("iothreads").text == "2"


def test_a_virtqueue_size_is_qemus_power_of_two(tmp_path):
    p = plan(tmp_path, "virtio-blk")
    assert parse(backends.get("virtio-blk").attach(p, p.vms[0])).find("devices/disk/driver").get("queue_size") == "256"
    with pytest.raises(ValueError, match="a virtqueue's size is a power of two from 4 to 1024"):
        plan(tmp_path, "virtio-blk", queue_size=1000)


def test_block_source_and_no_iothread(tmp_path):
    p = plan(tmp_path, "virtio-blk", device=BLOCK, iothreads=0)
    root = parse(backends.get("virtio-blk").attach(p, p.vms[0]))
    assert root.find("devices/disk").get("type") == "block"
    assert root.find("devices/disk/source").get("dev") == "/dev/loop7"
    assert root.find("iothreads") is None and root.find("devices/disk/driver").get("iothread") is None


def test_virtio_scsi_has_a_controller_and_a_scsi_disk(tmp_path):
    p = plan(tmp_path, "virtio-scsi")
    root = parse(backends.get("virtio-scsi").attach(p, p.vms[0]))
    assert root.find("devices/controller").get("model") == "virtio-scsi"
    assert root.find("devices/disk/target").get("bus") == "scsi"


def test_nvme_is_on_the_qemu_command_line(tmp_path):
    p = plan(tmp_path, "nvme", num_queues=2)
    a = backends.get("nvme").attach(p, p.vms[1])
    args = [e.get("value") for e in parse(a).iter(f"{{{QEMU_NS}}}arg")]
    assert args[0] == "-blockdev" and f"filename={FILE.path}" in args[1] and "locking=off" in args[1]
    assert f"offset={64 * MIB},size={64 * MIB}" in args[3]
    assert args[4:] == ["-device", "nvme,drive=vtbdata,serial=vtb-data,max_ioqpairs=2,bus=pci.0,addr=0x10"]
    assert a.locator == "pci:0000:00:10.0"


def test_vhost_user_qsd_shares_memory_and_uses_its_socket(tmp_path):
    p = plan(tmp_path, "vhost-user-blk-qsd")
    root = parse(backends.get("vhost-user-blk-qsd").attach(p, p.vms[0]))
    assert root.find("memoryBacking/source").get("type") == "memfd"
    assert root.find("memoryBacking/access").get("mode") == "shared"
    args = [e.get("value") for e in root.iter(f"{{{QEMU_NS}}}arg")]
    assert args[1] == f"socket,id=vtbvhost,path={tmp_path}/vtb-x-run/vtb-x-vm0.vhost.sock"


def test_storage_daemon_socket_in_use_is_refused(tmp_path):
    p = plan(tmp_path, "vhost-user-blk-qsd")
    p.run_dir.mkdir()
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(p.run_dir / "vtb-x-vm0.vhost.sock"))
        s.listen()
        reason = backends.get("vhost-user-blk-qsd").preflight(LocalHost(), p)  # checked on the fleet's host
    assert "vtb-x-vm0.vhost.sock is already in use" in reason


@pytest.mark.parametrize("per", ["vm", "device"])
def test_storage_daemons_start_listen_and_stop_through_the_fleets_host(tmp_path, per):
    """The real qemu-storage-daemon, started and stopped with commands run on the host node."""
    from harness.backends.base import listening
    from harness.backends.vhost_user_qsd import socket_path
    device = tmp_path / "device.raw"
    device.write_bytes(b"\0" * (128 * MIB))
    p = plan(tmp_path, "vhost-user-blk-qsd", device=HostDevice(path=str(device), kind="block"), qsd_per=per)
    qsd, host = backends.get("vhost-user-blk-qsd"), LocalHost()
    qsd.host_up(host, p)
    try:
        assert all(listening(host, socket_path(p, vm)) for vm in p.vms)
        assert len(list(p.run_dir.glob("*.pid"))) == (1 if per == "device" else 2)
        qsd.host_up(host, p)  # idempotent: the running daemons are kept
    finally:
        qsd.host_down(host, p)
    assert not list(p.run_dir.iterdir())   # no pid file, no socket
    assert subprocess.run(["pgrep", "-f", f"qemu-storage-daemon.*{tmp_path}"]).returncode == 1


def test_passthrough_needs_a_block_device(tmp_path):
    b = backends.get("passthrough-block")
    assert "needs a host block device" in b.preflight(None, plan(tmp_path, "passthrough-block"))
    assert b.preflight(None, plan(tmp_path, "passthrough-block", device=BLOCK)) is None


def test_xslt_braces_are_escaped(tmp_path):
    p = plan(tmp_path, "virtio-blk", device=HostDevice(path="/dev/disk/by-id/a{b}", kind="block"))
    assert "a{{b}}" in backends.get("virtio-blk").attach(p, p.vms[0]).devices_xml


@pytest.mark.parametrize("name", sorted(backends.all_backends()))
def test_metadata_has_every_knob(name):
    disk = config.DiskConfig(backend=name, **({"pci_address": "0000:01:00.0"} if name == "vfio" else {}))
    meta = backends.get(name).metadata(disk)
    assert meta["backend"] == name and {"cache", "aio", "iothreads", "num_queues"} <= set(meta)


def test_rbd_slices_of_one_image_through_qemus_rbd_driver(tmp_path):
    device = HostDevice(path="rbd:vtb-x-ceph-n2/vtb-x-device@/s/vtb-x-ceph/ceph.conf", kind="rbd")
    p = plan(tmp_path, "rbd", device=device, cache="none", iothreads=1, num_queues=2)
    a = backends.get("rbd").attach(p, p.vms[1])
    args = [e.get("value") for e in parse(a).iter(f"{{{QEMU_NS}}}arg")]
    assert "driver=rbd,node-name=vtbdata-rbd,pool=vtb-x-ceph-n2,image=vtb-x-device,conf=/s/vtb-x-ceph/ceph.conf," \
           "user=admin,cache.direct=on" in args
    assert f"driver=raw,node-name=vtbdata,file=vtbdata-rbd,offset={64 * MIB},size={64 * MIB}" in args
    assert "virtio-blk-pci,drive=vtbdata,serial=vtb-data,num-queues=2,iothread=vtbio0,bus=pci.0,addr=0x10" in args
    assert a.locator == "serial:vtb-data" and HostPlan.from_json(p.to_json()) == p


@pytest.mark.parametrize("name", sorted(backends.all_backends()))
def test_what_a_guest_sees_of_its_disk_names_its_size_and_every_option_its_backend_honours(tmp_path, name):
    """A restored guest's template is keyed by this (vm_start.template_key): a disk served from
    outside QEMU has its size and settings only on the daemon's command line."""
    b = backends.get(name)
    p = plan(tmp_path, name)
    view = b.guest_view(p, p.vms[0])
    assert view["size"] == 64 * MIB and set(view["disk"]) == set(b.options)
    bigger = VmSlot(0, "vtb-x-vm0", 0, 128 * MIB)
    assert b.guest_view(p, bigger) != view
    assert b.guest_view(p, p.vms[1]) == {**view, "size": p.vms[1].size}   # each VM of one shape alike
