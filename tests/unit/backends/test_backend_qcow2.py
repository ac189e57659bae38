"""The qcow2 backend: its QEMU command line, and real qemu-img images (preallocated as asked, of
the cluster size asked) that QEMU's qcow2 driver reads and writes, on this machine (no VM)."""
import json
import subprocess
import xml.etree.ElementTree as ET

import pytest

from harness import backends
from harness.backends import HostDevice, HostPlan, VmSlot
from harness.backends.qcow2 import image_path
from harness.common.schema import ConfigError
from harness.config import core as config
from harness.hosts import LocalHost
from harness.libvirt.libvirt_xml import QEMU_NS

MIB = 1 << 20


def plan(tmp_path, device: HostDevice, **disk) -> HostPlan:
    d = config.DiskConfig(backend="qcow2", **disk).model_dump()
    return HostPlan(prefix="vtb-x", fleet_dir=str(tmp_path), disk=d, device=device,
                    vms=[VmSlot(0, "vtb-x-vm0", 0, 4 * MIB), VmSlot(1, "vtb-x-vm1", 4 * MIB, 4 * MIB)])


FILE = HostDevice(path="/var/lib/vtb/x/pool/vtb-x-device.raw", kind="file", pool="vtb-x-pool", volume="vtb-x-device.raw")


def test_the_disk_is_qemus_qcow2_driver_on_the_vms_image_under_virtio_blk(tmp_path):
    p = plan(tmp_path, FILE, cache="none", aio="native", iothreads=1, num_queues=2)
    a = backends.get("qcow2").attach(p, p.vms[1])
    root = ET.fromstring(f"<domain xmlns:qemu='{QEMU_NS}'>{a.domain_xml}</domain>")
    args = [e.get("value") for e in root.iter(f"{{{QEMU_NS}}}arg")]
    assert args[:4] == ["-blockdev", f"driver=file,node-name=vtbdata-file,filename={tmp_path}/vtb-x-run/vtb-x-vm1.qcow2,"
                                     "cache.direct=on,aio=native",
                        "-blockdev", "driver=qcow2,node-name=vtbdata,file=vtbdata-file"]
    assert args[-2:] == ["-device", "virtio-blk-pci,drive=vtbdata,serial=vtb-data,num-queues=2,iothread=vtbio0,"
                                    "bus=pci.0,addr=0x10"]
    assert a.locator == "serial:vtb-data"


def test_a_fleet_on_a_block_device_is_refused_and_a_cluster_qemu_cannot_make_names_the_field(tmp_path):
    why = backends.get("qcow2").preflight(LocalHost(), plan(tmp_path, HostDevice(path="/dev/loop7", kind="block")))
    assert "block device" in why and "Fix: leave fleet.device unset" in why
    with pytest.raises((ConfigError, ValueError), match="power of two from 1 to 2048 KiB"):
        config.DiskConfig(backend="qcow2", qcow2_cluster_kib=3)


@pytest.mark.parametrize("prealloc", ["full", "off"])
def test_each_vms_image_is_made_as_asked_read_and_written_by_qemu_and_removed(tmp_path, prealloc):
    p = plan(tmp_path, FILE, qcow2_preallocation=prealloc, qcow2_cluster_kib=256)
    qcow2, host = backends.get("qcow2"), LocalHost()
    assert qcow2.preflight(host, p) is None
    qcow2.host_up(host, p)
    try:
        qcow2.host_up(host, p)   # idempotent: the images are kept
        for vm in p.vms:
            info = json.loads(subprocess.run(["qemu-img", "info", "--output=json", str(image_path(p, vm))],
                                             capture_output=True, text=True, check=True, timeout=60).stdout)
            assert info["format"] == "qcow2" and info["virtual-size"] == 4 * MIB and info["cluster-size"] == 256 << 10
            # full: every cluster on disk; off: next to nothing until written
            assert (info["actual-size"] >= 4 * MIB) == (prealloc == "full")
            out = subprocess.run(["qemu-io", "-f", "qcow2", str(image_path(p, vm)), "-c", "write -P 0xab 0 64k",
                                  "-c", "read -P 0xab 0 64k"], capture_output=True, text=True, timeout=60)
            assert out.returncode == 0 and "Pattern verification failed" not in out.stdout, out.stdout + out.stderr
    finally:
        qcow2.host_down(host, p)
    assert not any(image_path(p, vm).exists() for vm in p.vms)
