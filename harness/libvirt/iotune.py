"""libvirt's I/O limits (`iotune`) on a domain's data disk, found by its serial: set live while
something runs, lifted after."""
from __future__ import annotations

import contextlib
import xml.etree.ElementTree as ET
from typing import Iterator

import libvirt

from harness.common import bounded
from harness.common.console import warn
from harness.libvirt.libvirt_conn import connect, domain_call

IOTUNE_S = 30    # bound of one live iotune change (a QEMU that does not answer its monitor holds it)


def data_disk_target(dom: libvirt.virDomain, serial: str) -> str | None:
    """The target name (vdb, sda) of the domain's <disk> with this serial, or None (no such disk)."""
    root = ET.fromstring(domain_call(dom, "XMLDesc", 0))
    for disk in root.iter("disk"):
        if disk.findtext("serial") == serial and (target := disk.find("target")) is not None:
            return target.get("dev")
    return None


def has_disk(uri: str, domain: str, serial: str) -> bool:
    """Whether libvirt drives the domain's disk of this serial (a <disk>: iotune can limit it)."""
    conn = connect(uri)
    try:
        return data_disk_target(conn.lookupByName(domain), serial) is not None
    finally:
        conn.close()


def _set(dom: libvirt.virDomain, dev: str, iops: int) -> None:
    bounded.call(lambda: dom.setBlockIoTune(dev, {"total_iops_sec": iops}, libvirt.VIR_DOMAIN_AFFECT_LIVE),
                 f"iotune total_iops_sec={iops} on {dom.name()}", IOTUNE_S, "its QEMU is not answering its monitor")


@contextlib.contextmanager
def capped(uri: str, disks: list[tuple[str, str]], iops: int) -> Iterator[None]:
    """Each (domain, serial) disk limited to `iops` (live) for the body, then unlimited; 0 sets
    each unlimited (so that a limit an interrupted body left is gone)."""
    conn = connect(uri)
    try:
        targets = [(dom, data_disk_target(dom, serial)) for dom, serial in
                   ((conn.lookupByName(name), serial) for name, serial in disks)]
        for dom, dev in targets:
            _set(dom, dev, iops)
        yield
        for dom, dev in targets if iops else ():
            try:
                _set(dom, dev, 0)
            except (libvirt.libvirtError, bounded.Unanswered) as e:   # the next uncapped use sets it again
                warn(f"{dom.name()}: its iotune cap could not be lifted ({e}); the next uncapped point sets it again")
    finally:
        conn.close()
