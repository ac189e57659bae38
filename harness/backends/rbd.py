"""Ceph RBD: the VMs' data disks are slices of one RBD image per host, served by QEMU's rbd driver
(librbd) as virtio-blk. The image lives in the fleet's own cluster, on this machine (ceph.mode =
"local", made by Terraform's hook through `python -m harness.resources ceph create`) or over the [[hosts]]
(ceph.mode = "hosts"), or in a user's pool (ceph.mode = "existing"). The physical baseline is
fio's librbd engine on the same image.

The host-kernel krbd path is not here: this machine's kernel has no rbd module."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from harness.backends.base import Attachment, Backend, HostPlan, HostProcess, VmSlot, virtio_blk_args
from harness.hosts import Host
from harness.libvirt.libvirt_xml import qemu_commandline, qemu_opt
from harness.resources.ceph import images
from harness.resources.ceph.fleet_store import FleetCeph
from harness.resources.ceph.images import RbdImage
from harness.resources.ceph.plan import CephFleet

QEMU_DRIVER = "/usr/lib/x86_64-linux-gnu/qemu/block-rbd.so"


class Rbd(Backend):
    name = "rbd"
    # a cluster vtb made on this machine (an existing one's daemons are counted where they run here)
    processes = tuple(HostProcess("ceph", d, f"{d} ", what="Ceph daemons") for d in ("ceph-osd", "ceph-mon", "ceph-mgr"))
    host_packages = ("ceph-common", "qemu-block-extra")   # rbd for the images; QEMU's librbd driver
    shared_options = frozenset({"cache", "iothreads", "num_queues"})
    summary = "virtio-blk over a Ceph RBD image (QEMU's librbd), in a cluster vtb makes or yours ([ceph])"
    host_slices = False

    def disk_store(self, ceph: CephFleet, hosts: Callable[[], list[Host]], host: Host, host_dir: Path,
                   image_base: str) -> FleetCeph:
        return FleetCeph(ceph, hosts, host, host_dir, image_base)

    def preflight(self, host: Host, plan: HostPlan) -> str | None:
        missing = host.run(["sh", "-c", f"command -v rbd >/dev/null || echo ceph-common; [ -e {QEMU_DRIVER} ] || "
                            "echo qemu-block-extra"], check=False, timeout=30).stdout.decode().split()
        if missing:
            return f"{' and '.join(missing)} missing on {host.label} (Debian: apt install {' '.join(missing)})"
        conf = RbdImage.parse(plan.device.path).conf
        if not host.is_this_machine and host.run(["test", "-f", conf], timeout=30, check=False).returncode != 0:
            # a local cluster (made by the fleet's own Terraform, after this check) serves this machine
            return (f"the cluster's client conf {conf} is not on {host.label}: a cluster of ceph.mode=\"local\" "
                    "serves this machine's fleets only, and one of ceph.mode=\"existing\" is reached from here. "
                    'Fix: for a fleet on [[hosts]], set ceph.mode="hosts"')
        return None

    def host_up(self, host: Host, plan: HostPlan) -> None:
        images.create(host, RbdImage.parse(plan.device.path), plan.device_bytes, plan.prefix)

    def host_down(self, host: Host, plan: HostPlan) -> None:
        # only an image this fleet made; a cluster already gone has none left (the command fails, bounded)
        try:
            images.remove(host, RbdImage.parse(plan.device.path), plan.prefix)
        except images.ImageError:
            pass

    def fault(self, host: Host, device_path: str) -> str | None:
        return images.health_fault(host, RbdImage.parse(device_path))

    def attach(self, plan: HostPlan, vm: VmSlot) -> Attachment:
        """QEMU's rbd block driver, given on its command line: provider v0.8.3 cannot read a libvirt
        network disk back (it fails on the rbd source's URL). The slice is a raw node over it. The
        client's conf names its keyring, so no key goes on the command line."""
        d, node, img = plan.disk, "vtbdata", RbdImage.parse(plan.device.path)
        direct = "on" if d["cache"] in ("none", "directsync") else "off"   # off: librbd's own cache
        args = ["-blockdev", f"driver=rbd,node-name={node}-rbd,pool={qemu_opt(img.pool)},image={qemu_opt(img.image)},"
                             f"conf={qemu_opt(img.conf)},user={qemu_opt(img.client)},cache.direct={direct}",
                "-blockdev", f"driver=raw,node-name={node},file={node}-rbd,offset={vm.offset},size={vm.size}"]
        return Attachment(domain_xml=qemu_commandline(*args, *virtio_blk_args(node, d)))


BACKEND = Rbd()
