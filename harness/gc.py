"""Finds and removes what the harness created, by name prefix only: domains, pools, stray QEMU
processes and storage daemons, loop devices and mounts. Safe after a SIGKILL; never touches
anything without the prefix."""
from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import libvirt

from harness import paths


def _processes(prefix: str) -> list[tuple[int, str]]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        exe = os.path.basename(argv[0].decode(errors="replace"))
        if exe.startswith(("qemu-system", "qemu-storage-daemon")) and any(prefix.encode() in a for a in argv[1:]):
            found.append((int(proc.name), exe))
    return found


def _domains(conn: libvirt.virConnect, prefix: str) -> list[str]:
    removed = []
    for dom in conn.listAllDomains():
        if not dom.name().startswith(prefix):
            continue
        if dom.isActive():
            dom.destroy()
        if dom.isPersistent():
            dom.undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_NVRAM | libvirt.VIR_DOMAIN_UNDEFINE_MANAGED_SAVE
                              | libvirt.VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA)
        removed.append(f"domain {dom.name()}")
    return removed


def _pools(conn: libvirt.virConnect, prefix: str) -> list[str]:
    removed = []
    for pool in conn.listAllStoragePools():
        if not pool.name().startswith(prefix):
            continue
        if not pool.isActive():
            pool.create()
        pool.refresh()
        for vol in pool.listAllVolumes():
            vol.delete()
        pool.destroy()
        try:
            pool.delete()  # removes the pool's (now empty) directory
        except libvirt.libvirtError:
            pass
        pool.undefine()
        removed.append(f"pool {pool.name()} and its volumes")
    return removed


def _loops_and_mounts(prefix: str) -> list[str]:
    removed = []
    for line in reversed(Path("/proc/mounts").read_text().splitlines()):
        target = line.split()[1]
        if any(part.startswith(prefix) for part in Path(target).parts):
            subprocess.run(["umount", "-l", target], check=False)
            removed.append(f"mount {target}")
    out = subprocess.run(["losetup", "--json", "--list"], capture_output=True, text=True).stdout
    for loop in json.loads(out or '{"loopdevices": []}').get("loopdevices", []):
        if Path(loop.get("back-file") or "").name.startswith(prefix):
            subprocess.run(["losetup", "-d", loop["name"]], check=False)
            removed.append(f"loop device {loop['name']}")
    return removed


def leftovers(prefix: str, uri: str = paths.LIBVIRT_URI) -> list[str]:
    """What exists with this prefix, without removing it (for checks and tests)."""
    found = [f"process {pid} ({exe})" for pid, exe in _processes(prefix)]
    conn = libvirt.open(uri)
    try:
        found += [f"domain {d.name()}" for d in conn.listAllDomains() if d.name().startswith(prefix)]
        found += [f"pool {p.name()}" for p in conn.listAllStoragePools() if p.name().startswith(prefix)]
    finally:
        conn.close()
    return found


def collect(prefix: str, uri: str = paths.LIBVIRT_URI) -> list[str]:
    """Removes everything with this prefix and says what it removed."""
    if not prefix.startswith(paths.PREFIX):
        raise ValueError(f"refusing to collect {prefix!r}: only names starting with {paths.PREFIX} are ours")
    removed = []
    try:
        conn = libvirt.open(uri)
    except libvirt.libvirtError as e:
        conn = None
        removed.append(f"(libvirt not reachable, skipped domains and pools: {e.get_error_message()})")
    if conn is not None:
        try:
            removed += _domains(conn, prefix)
            removed += _pools(conn, prefix)
        finally:
            conn.close()
    for pid, exe in _processes(prefix):  # QEMUs libvirt no longer knows, probes, storage daemons
        try:
            os.kill(pid, signal.SIGKILL)
            removed.append(f"process {pid} ({exe})")
        except ProcessLookupError:
            pass
    removed += _loops_and_mounts(prefix)
    return removed
