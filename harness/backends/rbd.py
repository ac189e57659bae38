"""Ceph RBD: the VMs' data disks are slices of one RBD image in the fleet's own local Ceph cluster
([ceph], made by Terraform's hook through `harness host ceph create`), served by QEMU's rbd
driver (librbd) as virtio-blk. The physical baseline is fio's librbd engine on the same image.

Only this machine's local cluster for now: an existing cluster (cephx, a user's pool) and the
host-kernel krbd path are not here yet."""
from __future__ import annotations

from harness.backends.base import DATA_PCI_SLOT, DATA_SERIAL, Attachment, Backend, HostPlan, VmSlot
from harness.hosts import Host
from harness.libvirt_xml import qemu_commandline, qemu_opt

MOUNT_TIMEOUT_S = 30   # a cluster that does not answer fails the command instead of hanging it
QEMU_DRIVER = "/usr/lib/x86_64-linux-gnu/qemu/block-rbd.so"


def parts(path: str) -> tuple[str, str]:
    """(pool/image, conf) of an rbd device path `rbd:POOL/IMAGE@CONF`."""
    spec, _, conf = path.removeprefix("rbd:").partition("@")
    return spec, conf


class Rbd(Backend):
    name = "rbd"
    shared_options = frozenset({"cache", "iothreads", "num_queues"})
    summary = "virtio-blk over a Ceph RBD image (QEMU's librbd), in a local cluster ([ceph])"
    needs_ceph = True
    local_host_only = True   # the local cluster's daemons and namespaces are this machine's

    def _rbd(self, plan: HostPlan, *args: str) -> list[str]:
        _, conf = parts(plan.device.path)
        return ["rbd", "-c", conf, "--client-mount-timeout", str(MOUNT_TIMEOUT_S), *args]

    def preflight(self, host: Host, plan: HostPlan) -> str | None:
        missing = host.run(["sh", "-c", f"command -v rbd >/dev/null || echo ceph-common; [ -e {QEMU_DRIVER} ] || "
                            "echo qemu-block-extra"], check=False, timeout=30).stdout.decode().split()
        if missing:
            return f"{' and '.join(missing)} missing on {host.label} (scripts/host-packages.sh installs them)"
        return None

    def host_up(self, host: Host, plan: HostPlan) -> None:
        """The fleet's image, made and prefilled once (a thin image reads zeros without asking an OSD).
        No exclusive-lock: every VM opens the image, each within its own slice."""
        image, size = parts(plan.device.path)[0], sum(vm.size for vm in plan.vms)
        if host.run(self._rbd(plan, "info", image), check=False, timeout=60).returncode == 0:
            return
        for what, argv, timeout in (
                ("rbd create", self._rbd(plan, "create", image, "--size", f"{size >> 20}M", "--image-feature",
                                         "layering"), 120),
                ("prefilling", self._rbd(plan, "bench", "--io-type", "write", "--io-pattern", "seq", "--io-size",
                                         "4M", "--io-threads", "4", "--io-total", str(size), image), 1800)):
            done = host.run(argv, check=False, timeout=timeout)
            if done.returncode != 0:
                raise RuntimeError(f"{what} {image} failed on {host.label}: "
                                   f"{done.stderr.decode(errors='replace').strip()[-300:]}")

    def host_down(self, host: Host, plan: HostPlan) -> None:
        # only the fleet's own image; a cluster already gone has none left (the command fails, bounded)
        host.run(self._rbd(plan, "rm", "--no-progress", parts(plan.device.path)[0]), check=False, timeout=300)

    def attach(self, plan: HostPlan, vm: VmSlot) -> Attachment:
        """QEMU's rbd block driver, given on its command line: provider v0.8.3 cannot read a libvirt
        network disk back (it fails on the rbd source's URL). The slice is a raw node over it."""
        d, node = plan.disk, "vtbdata"
        spec, conf = parts(plan.device.path)
        pool, _, image = spec.partition("/")
        direct = "on" if d["cache"] in ("none", "directsync") else "off"   # off: librbd's own cache
        args = ["-blockdev", f"driver=rbd,node-name={node}-rbd,pool={qemu_opt(pool)},image={qemu_opt(image)},"
                             f"conf={qemu_opt(conf)},user=admin,cache.direct={direct}",
                "-blockdev", f"driver=raw,node-name={node},file={node}-rbd,offset={vm.offset},size={vm.size}"]
        device = f"virtio-blk-pci,drive={node},serial={DATA_SERIAL},num-queues={d['num_queues']}"
        if d["iothreads"]:
            args += ["-object", "iothread,id=vtbio0"]
            device += ",iothread=vtbio0"
        args += ["-device", f"{device},bus=pci.0,addr={DATA_PCI_SLOT:#x}"]
        return Attachment(domain_xml=qemu_commandline(*args))


BACKEND = Rbd()
