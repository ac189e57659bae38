"""vfio: PCI passthrough of a whole NVMe controller to one VM (libvirt hostdev).

Preflight refuses unless the IOMMU is on, the device is an NVMe controller alone in its IOMMU
group, no host filesystem (least of all the root) lives on it, and each of its namespaces (found
through its NVMe subsystem too, under native multipath; none found is a refusal) passes the device
gate (harness/resources/devices.py: not held by LVM/dm/md, not swap, no signature unless
disk.pci_wipe). host_up binds it to vfio-pci
and remembers the driver it had; host_down gives it back. Every sysfs path is relative to a root
so the checks run against recorded sysfs trees in tests.
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from pydantic import Field

from harness.backends.base import DATA_PCI_SLOT, Attachment, Backend, HostPlan, VmSlot, pci_address
from harness.common.exits import StepFailed
from harness.common.schema import Section
from harness.hosts import LocalHost
from harness.libvirt.libvirt_xml import attr
from harness.resources import devices

NVME_CLASS = 0x010802
PCI_ADDRESS = r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$"   # domain:bus:slot.function, nothing more
PATH_DEVICE = re.compile(r"nvme(\d+)c\d+n(\d+)")   # a native-multipath path: subsystem, controller, namespace


class Sysfs:
    def __init__(self, root: Path = Path("/"), proc_mounts: Path | None = None):
        self.root = root
        self.live = root == Path("/")   # this machine's own tree, not a recorded one
        self.proc_mounts = proc_mounts or root / "proc" / "mounts"

    def p(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def device(self, addr: str) -> Path:
        return self.p(f"/sys/bus/pci/devices/{addr}")

    def driver(self, addr: str) -> str | None:
        link = self.device(addr) / "driver"
        return os.path.basename(os.readlink(link)) if link.is_symlink() else None

    def disk_refusal(self, name: str, wipe: bool, allow: list[str] | None = None) -> str | None:
        """Why a namespace on the controller must not be handed over: on this machine, the one
        device gate (on `allow`, raid.allow, when given; holders, swap, exclusive open, signatures;
        a failed probe refuses); in a recorded tree, its holders (LVM/dm, md)."""
        if self.live:
            return devices.refuse_reason(Path("/dev") / name, allow_signature=wipe, wipe_field="disk.pci_wipe",
                                         allow=allow, allow_field="raid.allow")
        holders = self.p(f"/sys/class/block/{name}/holders")
        users = sorted(h.name for h in holders.iterdir()) if holders.is_dir() else []
        return f"it is held by {', '.join(users)} (LVM/dm or an md array); release it first" if users else None

    def block_devices_on(self, addr: str) -> list[str]:
        """Block devices whose sysfs device path runs through this PCI function."""
        found = []
        for blk in sorted(self.p("/sys/class/block").glob("*")):
            if f"/{addr}/" in os.path.realpath(blk):
                found.append(blk.name)
        return found

    def namespaces_on(self, addr: str) -> tuple[list[str], str | None]:
        """The whole namespaces (block devices with a /dev node) this PCI function serves, and why a
        path of one could not be followed to it. The kernel's native NVMe multipath shows the
        controller only hidden paths (nvmeXcYnZ); their namespace is the head nvmeXnZ of the
        controller's subsystem (/sys/class/nvme-subsystem/nvme-subsysX, under /sys/devices/virtual)."""
        heads, found = set(), []
        for subsys in sorted(self.p("/sys/class/nvme-subsystem").glob("nvme-subsys*")):
            # a subsystem links each of its controllers by name; one that leads through addr is this one's
            if any(f"/{addr}/" in os.path.realpath(c) for c in subsys.glob("nvme*") if c.is_symlink()):
                heads |= {h.name for h in subsys.glob("nvme*n*") if not h.is_symlink()}
        for name in self.block_devices_on(addr):
            node = self.p(f"/sys/class/block/{name}")
            if (node / "partition").exists():
                continue
            if (node / "hidden").exists() and (node / "hidden").read_text().strip() == "1":
                m = PATH_DEVICE.fullmatch(name)
                head = m and f"nvme{m[1]}n{m[2]}"
                if not head or head not in heads:
                    return found, f"its namespace path {name} leads to no namespace of its NVMe subsystem"
                name = head
            if name not in found:
                found.append(name)
        return found, None


def _device_refusal(addr: str, sysfs: Sysfs) -> str | None:
    """Why the PCI device itself cannot be passed through: absent, not NVMe, not alone in its IOMMU group."""
    dev = sysfs.device(addr)
    if not dev.exists():
        return f"there is no PCI device {addr}"
    pci_class = int((dev / "class").read_text().strip(), 16)
    if pci_class != NVME_CLASS:
        return f"{addr} is not an NVMe controller (PCI class {pci_class:#08x}, NVMe is {NVME_CLASS:#08x})"
    group_link = dev / "iommu_group"
    if not group_link.is_symlink():
        return f"{addr} has no IOMMU group"
    group = os.path.basename(os.readlink(group_link))
    others = sorted(d.name for d in sysfs.p(f"/sys/kernel/iommu_groups/{group}/devices").iterdir() if d.name != addr)
    if others:
        return f"{addr} shares IOMMU group {group} with {', '.join(others)}; passing it through would take them too"
    return None


def _mounted(addr: str, namespaces: list[str], sysfs: Sysfs) -> str | None:
    """A filesystem mounted from one of the controller's namespaces, said; or None."""
    for line in sysfs.proc_mounts.read_text().splitlines():
        src, target = line.split()[:2]
        # nvme1n1p2 lives on nvme1n1: partitions are matched by their disk's name
        if src.startswith("/dev/") and any(os.path.basename(src).startswith(n) for n in namespaces):
            what = "the host's root filesystem" if target == "/" else f"a filesystem mounted on {target}"
            return f"{addr} holds {what} ({src}); it cannot be passed through"
    return None


def refuse_reason(addr: str | None, sysfs: Sysfs, vms: int = 1, wipe: bool = False,
                  allow: list[str] | None = None) -> str | None:
    """Why the controller at `addr` must not be passed through, or None. `allow`: this machine's
    allowlist (raid.allow), on which each of its namespaces must be (a mistyped address that names
    another, blank controller is refused); None in a recorded tree."""
    groups = sysfs.p("/sys/kernel/iommu_groups")
    if not groups.is_dir() or not any(groups.iterdir()):
        return ("the IOMMU is off (no IOMMU groups in /sys/kernel/iommu_groups): enable VT-d/AMD-Vi in "
                "firmware and boot with intel_iommu=on or amd_iommu=on")
    if not addr:
        return "vfio needs disk.pci_address, the NVMe controller to pass through (e.g. 0000:01:00.0)"
    if why := _device_refusal(addr, sysfs):
        return why
    namespaces, unfollowed = sysfs.namespaces_on(addr)
    if unfollowed or not namespaces:
        # its namespaces are what the allowlist and the system-disk checks prove it free by
        return (f"{addr} cannot be proved free: {unfollowed or 'no namespace of it was found'}, so neither "
                f"{'raid.allow' if allow is not None else 'the allowlist'} nor the system-disk checks can be "
                "applied. Fix: let the nvme driver bind it and show its namespaces (a controller on another "
                "driver, vfio-pci included, shows none), or create one (nvme create-ns)")
    if why := _mounted(addr, namespaces, sysfs):
        return why
    for name in namespaces:
        if why := sysfs.disk_refusal(name, wipe, allow):
            return f"{addr} holds /dev/{name}, refused: {why}"
    if vms != 1:
        return "vfio gives one controller to one VM: set fleet.vms=1"
    return None


class VfioOptions(Section):
    pci_address: str | None = Field(None, pattern=PCI_ADDRESS,
                                    description="vfio: the NVMe controller to pass through, e.g. 0000:01:00.0")
    pci_wipe: bool = Field(False, description="vfio: allow a controller whose namespaces carry a partition table or "
                                              "filesystem signature (their data may be destroyed)")


class Vfio(Backend):
    name = "vfio"
    Options = VfioOptions
    local_host_only = True
    summary = "PCI passthrough of an NVMe controller (vfio-pci)"

    def __init__(self, sysfs: Sysfs | None = None):
        self.sysfs = sysfs or Sysfs()

    def preflight(self, host: LocalHost, plan: HostPlan) -> str | None:
        addr = plan.disk["pci_address"]
        if addr and self.sysfs.driver(addr) == "vfio-pci" and self._saved_driver(plan).exists():
            return None   # this fleet's: proved free when its host_up bound it (its namespaces are out of view since)
        return refuse_reason(plan.disk["pci_address"], self.sysfs, len(plan.vms), bool(plan.disk.get("pci_wipe")),
                             plan.allow)

    @staticmethod
    def _address(plan: HostPlan) -> str:
        """The plan's controller, checked before it is joined into a sysfs path (a plan is read back from disk)."""
        addr = plan.disk.get("pci_address")
        if not isinstance(addr, str) or not re.fullmatch(PCI_ADDRESS, addr):
            raise ValueError(f"vfio: disk.pci_address {addr!r} is not a PCI address (e.g. 0000:01:00.0)")
        return addr

    def _saved_driver(self, plan: HostPlan) -> Path:
        return plan.run_dir / f"{plan.disk['pci_address']}.driver"

    def host_up(self, host: LocalHost, plan: HostPlan) -> None:
        addr, s = self._address(plan), self.sysfs
        if s.driver(addr) == "vfio-pci":
            return
        # the gate again at the moment of use: a namespace may have been mounted since preflight
        if reason := refuse_reason(addr, s, len(plan.vms), bool(plan.disk.get("pci_wipe")), plan.allow):
            raise StepFailed(f"vfio: not unbinding {addr}: {reason}")
        subprocess.run(["modprobe", "vfio-pci"], check=False, timeout=60)
        plan.run_dir.mkdir(parents=True, exist_ok=True)
        self._saved_driver(plan).write_text(s.driver(addr) or "")
        (s.device(addr) / "driver_override").write_text("vfio-pci")
        if s.driver(addr):
            (s.device(addr) / "driver" / "unbind").write_text(addr)
        s.p("/sys/bus/pci/drivers_probe").write_text(addr)
        if s.driver(addr) != "vfio-pci":
            self.host_down(host, plan)
            raise StepFailed(f"{addr} did not bind to vfio-pci")

    def host_down(self, host: LocalHost, plan: HostPlan) -> None:
        addr, s = self._address(plan), self.sysfs
        if not s.device(addr).exists():
            return
        if s.driver(addr) == "vfio-pci":
            (s.device(addr) / "driver" / "unbind").write_text(addr)
        (s.device(addr) / "driver_override").write_text("\n")
        saved = self._saved_driver(plan)
        original = saved.read_text().strip() if saved.exists() else ""
        if original:
            s.p(f"/sys/bus/pci/drivers/{original}/bind").write_text(addr)
        else:
            s.p("/sys/bus/pci/drivers_probe").write_text(addr)
        saved.unlink(missing_ok=True)

    def attach(self, plan: HostPlan, vm: VmSlot) -> Attachment:
        return Attachment(devices_xml=hostdev_xml(plan.disk["pci_address"]), locator=f"pci:{pci_address()}")


def hostdev_xml(addr: str, guest_slot: int = DATA_PCI_SLOT) -> str:
    domain, bus, slotfn = addr.split(":")
    slot, fn = slotfn.split(".")
    return (f"<hostdev mode='subsystem' type='pci' managed='no'><driver name='vfio'/><source>"
            f"<address domain={attr('0x' + domain)} bus={attr('0x' + bus)} slot={attr('0x' + slot)}"
            f" function={attr('0x' + fn)}/></source>"
            f"<address type='pci' domain='0x0000' bus='0x00' slot={attr(f'{guest_slot:#04x}')} function='0x0'/>"
            f"</hostdev>")


BACKEND = Vfio()
