"""nvme: QEMU's emulated NVMe controller. libvirt 9.0 has no NVMe disk bus, so the device goes
on the QEMU command line with an explicit PCI address (which the guest finds it by)."""
from __future__ import annotations

from harness.backends.base import (
    AIO,
    CACHE,
    DATA_PCI_SLOT,
    DATA_SERIAL,
    NUM_QUEUES,
    Attachment,
    Backend,
    HostPlan,
    VmSlot,
    file_blockdev,
    pci_address,
)
from harness.libvirt.libvirt_xml import qemu_commandline


class Nvme(Backend):
    name = "nvme"
    shared_options = frozenset({"cache", "aio", "num_queues"})  # QEMU 7.2's nvme device takes no iothread
    knobs = (AIO, CACHE, NUM_QUEUES)
    summary = "emulated NVMe controller (QEMU nvme device)"

    def attach(self, plan: HostPlan, vm: VmSlot) -> Attachment:
        d = plan.disk
        node = "vtbdata"
        args = [a for spec in file_blockdev(node, plan.device.path, d["cache"], d["aio"], vm) for a in ("-blockdev", spec)]
        args += ["-device", f"nvme,drive={node},serial={DATA_SERIAL},max_ioqpairs={d['num_queues']},"
                            f"bus=pci.0,addr={DATA_PCI_SLOT:#x}"]
        return Attachment(domain_xml=qemu_commandline(*args), locator=f"pci:{pci_address()}")


BACKEND = Nvme()
