"""null: a virtio-blk device on QEMU's null-co driver (no storage, zero added latency). Not a way
to serve a disk: the latency breakdown measures the virtualization layers with it, so the
comparisons of real backends leave it out unless it is named."""
from __future__ import annotations

from harness.backends.base import DATA_PCI_SLOT, DATA_SERIAL, Attachment, Backend, HostPlan, VmSlot
from harness.libvirt.libvirt_xml import qemu_commandline


class Null(Backend):
    name = "null"
    shared_options = frozenset()
    summary = "virtio-blk on QEMU null-co (no storage): the virtualization layers alone"
    diagnostic = True
    stores_nothing = True

    def attach(self, plan: HostPlan, vm: VmSlot) -> Attachment:
        args = ["-blockdev", f"driver=null-co,node-name=vtbnull,size={vm.size},latency-ns=0",
                "-device", f"virtio-blk-pci,drive=vtbnull,serial={DATA_SERIAL},bus=pci.0,addr={DATA_PCI_SLOT:#x}"]
        return Attachment(domain_xml=qemu_commandline(*args))


BACKEND = Null()
