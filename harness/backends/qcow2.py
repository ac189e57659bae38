"""qcow2: each VM's data disk is a qcow2 image file on the host's filesystem, read by QEMU's qcow2
driver under virtio-blk: the way most clouds' compute nodes serve local disks. The images sit in
the fleet's own folder on the host, beside the fleet's device file (the host baseline's), so both
stand on the same filesystem; a fleet on a block device is refused (its baseline would be
another disk). Preallocation and cluster size are options.

A cluster never written reads as zeros without I/O: with preallocation `off`, `metadata` or
`falloc`, a fresh image's reads measure no storage at all. `full` (the default) writes every
cluster first, so reads go to the disk.
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from harness.backends.base import Attachment, Backend, HostPlan, VmSlot, succeeds, virtio_blk_args
from harness.common import bounded
from harness.common.exits import StepFailed
from harness.common.schema import Section
from harness.hosts import Host
from harness.libvirt.libvirt_xml import qemu_commandline, qemu_opt


def _cluster(kib: int) -> int:
    if kib & (kib - 1) or not 1 <= kib <= 2048:
        raise ValueError("a qcow2 cluster is a power of two from 1 to 2048 KiB (QEMU's range)")
    return kib


class Qcow2Options(Section):
    qcow2_preallocation: Literal["off", "metadata", "falloc", "full"] = Field(
        "full", description="qcow2: qemu-img's preallocation of each image (full: every cluster written, so reads "
                            "do I/O)")
    qcow2_cluster_kib: Annotated[int, AfterValidator(_cluster)] = Field(
        64, description="qcow2: cluster size in KiB (a power of two, 1-2048)")


def image_path(plan: HostPlan, vm: VmSlot) -> Path:
    return plan.run_dir / f"{vm.name}.qcow2"


class Qcow2(Backend):
    name = "qcow2"
    shared_options = frozenset({"cache", "aio", "iothreads", "num_queues"})
    Options = Qcow2Options
    summary = "virtio-blk on a qcow2 image file on the host's filesystem"

    def preflight(self, host: Host, plan: HostPlan) -> str | None:
        if plan.device.kind != "file":
            return ("qcow2 keeps each VM's disk in an image file beside the fleet's device file, and this fleet is on "
                    f"a {plan.device.kind} device, which its host baseline would measure instead. Fix: leave "
                    "fleet.device unset")
        if not succeeds(host, "command -v qemu-img"):
            return f"qemu-img is not installed on {host.label} (Debian: apt install qemu-utils)"
        return None

    def host_up(self, host: Host, plan: HostPlan) -> None:
        """Each VM's image, made once (an image already there is the fleet's: kept)."""
        host.run(["mkdir", "-p", str(plan.run_dir)], timeout=30)
        d = plan.disk
        for vm in plan.vms:
            path = image_path(plan, vm)
            if succeeds(host, '[ -f "$1" ]', path):
                continue
            out = host.run(["qemu-img", "create", "-q", "-f", "qcow2", "-o",
                            f"preallocation={d['qcow2_preallocation']},cluster_size={d['qcow2_cluster_kib']}k",
                            str(path), str(vm.size)], check=False, timeout=bounded.write_bound_s(vm.size))
            if out.returncode != 0:
                self.host_down(host, plan)
                raise StepFailed(f"qemu-img could not make {path} on {host.label}: "
                                 f"{out.stderr.decode(errors='replace').strip()}")

    def host_down(self, host: Host, plan: HostPlan) -> None:
        host.run(["rm", "-f", *(str(image_path(plan, vm)) for vm in plan.vms)], timeout=60)

    def attach(self, plan: HostPlan, vm: VmSlot) -> Attachment:
        """QEMU's qcow2 driver on the VM's image file, under virtio-blk (on QEMU's command line: the
        image is the backend's, not a volume of the fleet's pool)."""
        d, node = plan.disk, "vtbdata"
        direct = "on" if d["cache"] in ("none", "directsync") else "off"
        args = ["-blockdev", f"driver=file,node-name={node}-file,filename={qemu_opt(image_path(plan, vm))},"
                             f"cache.direct={direct},aio={d['aio']}",
                "-blockdev", f"driver=qcow2,node-name={node},file={node}-file"]
        return Attachment(domain_xml=qemu_commandline(*args, *virtio_blk_args(node, d)))


BACKEND = Qcow2()
