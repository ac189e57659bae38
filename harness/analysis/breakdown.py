"""Decomposing QD1 latency by layer, from five measurements of the same job (mean latency):

  host_null   host fio with the null ioengine              fio itself and host submission
  host_dev    host fio on the device                       + device and host storage stack
  guest_null  guest fio with the null ioengine             + guest stack (guest fio, syscalls, the vCPU)
  null_disk   guest fio on a null-co virtio-blk disk       + virtualization (guest driver, virtqueue,
                                                             device emulation, QEMU block layer)
  backend     guest fio on the backend's disk              + the rest: what the backend's own path
                                                             adds beyond null-co and the host stack

Limits: each layer is a difference of two means, so noise can make a small layer negative; it is
reported as measured and drawn from zero. fio's null ioengine makes no system calls, so "guest
stack" is the guest fio's own loop only; the guest kernel's block layer and driver fall into
"virtualization". The null-co disk has a virtio-blk front end: for other front ends (SCSI, NVMe,
vhost-user) their difference from virtio-blk lands in "backend path beyond null". Under TCG every
guest-side layer carries the CPU emulation's cost."""
from __future__ import annotations

LAYERS = ("fio and host submission", "device and host storage stack", "guest stack",
          "virtualization", "backend path beyond null")


def layers(host_null: float, host_dev: float, guest_null: float, null_disk: float, backend: float) -> dict[str, float]:
    devhost = host_dev - host_null
    return dict(zip(LAYERS, (host_null, devhost, guest_null - host_null, null_disk - guest_null,
                             backend - null_disk - devhost)))
