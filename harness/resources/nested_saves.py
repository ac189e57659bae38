"""The nested host (L1) started from a saved booted state, as fleet VMs start from templates
(harness/fleet/vm_start.py): booted once, saved as soon as its agent answers (before the testbed's
key is let in: each up lets it in), with its root overlay; a later `up` of the same L1 restores
it in seconds rather than booting it.

The key is everything the saved L1 sees: its domain XML (memory, vCPUs, CPU, its drives and their
sizes, its name and shared address; not the port its sshd is forwarded from, which is QEMU's, not
the guest's), the image, libvirt's and QEMU's versions, and this machine's kernel and CPU. The domain is defined with the saved
one's UUID, so that the save image is restored as it is. Its drives are new (prefilled anew): the
restored L1 drops what it cached of them. A restore that proves wrong (libvirt refuses it, its
agent stays silent, its drives are not found) is thrown away and the host boots afresh."""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import libvirt

from harness.common import paths
from harness.common.console import step
from harness.libvirt.agent import GuestAgent
from harness.libvirt.libvirt_conn import domain_call, restore_saved

RECIPE = "1"             # bump when what a saved L1 holds, or how it is made, changes
SAVES = paths.CACHE / "nested-saves"
KEEP = 8                 # the most recently used saved L1s kept (each about as large as its used memory)
IN_USE_S = 3600          # one used within this is never pruned: another up may be restoring it
AGENT_AFTER_RESTORE_S = 60


def key(xml: str, image: str, versions: str, *, drive_mib: int) -> str:
    """Which saved L1 a domain can be restored from (see the module's docstring)."""
    shape = re.sub(r"hostfwd=tcp:127\.0\.0\.1:\d+-", "hostfwd=tcp:127.0.0.1:PORT-", xml)
    return hashlib.sha256(f"{RECIPE}\n{image}\n{versions}\n{drive_mib}\n{_this_machine()}\n{shape}".encode()).hexdigest()[:16]


def _this_machine() -> str:
    """What of this machine a saved L1 depends on: its kernel, and its CPU (a KVM L1 takes it as it is)."""
    flags = next((line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags")), "")
    return f"{os.uname().release} {hashlib.sha256(flags.encode()).hexdigest()[:16]}"


def versions(conn: libvirt.virConnect) -> str:
    return f"libvirt {conn.getLibVersion()} qemu {conn.getVersion()}"


def saved(k: str) -> dict | None:
    """The saved L1 of key k ({uuid, booted_s, ...}), or None."""
    folder = SAVES / k
    try:
        about = json.loads((folder / "saved.json").read_text())
    except (OSError, ValueError):
        return None
    return about if (folder / "state.save").is_file() and (folder / "root.qcow2").is_file() else None


def capture(dom: libvirt.virDomain, agent: GuestAgent, state_dir: Path, k: str, booted_s: float) -> None:
    """Saves the booted L1 (it stops) with its root overlay as k, then restores it from there to go on."""
    agent.run(["sync"], timeout=60)
    final, work = SAVES / k, SAVES / f".{k}-{time.time_ns()}"
    work.mkdir(parents=True)
    try:
        t0 = time.monotonic()
        domain_call(dom, "save", str(work / "state.save"))
        shutil.copyfile(state_dir / "root.qcow2", work / "root.qcow2")
        (work / "saved.json").write_text(json.dumps({
            "key": k, "uuid": dom.UUIDString(), "booted_s": round(booted_s, 1), "recipe": RECIPE,
            "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "save_s": round(time.monotonic() - t0, 1)}, indent=2))
        if final.exists():   # another up made it meanwhile: as good as this one
            shutil.rmtree(work)
        else:
            work.rename(final)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    step(f"nested host: saved its booted state ({k}); later ups of this host restore it")
    _prune()
    restore(dom.connect(), dom.name(), k, state_dir, dom.XMLDesc(libvirt.VIR_DOMAIN_XML_SECURE), keep_root=True)


def restore(conn: libvirt.virConnect, name: str, k: str, state_dir: Path, xml: str, keep_root: bool = False) -> None:
    """The L1 from saved state k, running, with `xml` (its sshd's port may differ from the saved
    one): its root overlay the saved one (the saved memory caches its filesystem as it was)."""
    folder = SAVES / k
    (folder / "saved.json").touch()   # recently used: kept by _prune
    if not keep_root:
        shutil.copyfile(folder / "root.qcow2", state_dir / "root.qcow2.restore")
        (state_dir / "root.qcow2.restore").rename(state_dir / "root.qcow2")
    restore_saved(conn, name, str(folder / "state.save"), xml)


def made_its_own(agent: GuestAgent) -> None:
    """A restored L1 brought to the present: its clock set to this machine's, and what it cached of
    its drives (the saved one's, now prefilled anew) dropped. Raises AgentError when it does not answer."""
    agent.wait_ready(AGENT_AFTER_RESTORE_S)
    agent.command("guest-set-time", {"time": time.time_ns()})
    agent.run(["/bin/sh", "-c", "sync; for d in /sys/block/nvme*n* /sys/block/vd[b-z]; do [ -e \"$d\" ] && "
               "blockdev --flushbufs \"/dev/${d##*/}\"; done; echo 3 > /proc/sys/vm/drop_caches"], timeout=60)


def refused(k: str) -> str | None:
    """Why L1s of key k are not saved (saving or restoring one failed before), or None."""
    try:
        return (SAVES / f"{k}.refused").read_text().strip()
    except OSError:
        return None


def refuse(k: str, reason: str) -> None:
    SAVES.mkdir(parents=True, exist_ok=True)
    (SAVES / f"{k}.refused").write_text(reason + "\n")


def forget(k: str) -> None:
    """A saved L1 that proved wrong: thrown away (the next boot saves a fitting one)."""
    shutil.rmtree(SAVES / k, ignore_errors=True)


def _prune() -> None:
    """The KEEP most recently used saved L1s stay; saves left half made (killed while saving) go
    once an hour old."""
    if not SAVES.is_dir():
        return
    now = time.time()
    for half in SAVES.glob(".*-*"):
        if now - _used(half) > IN_USE_S:
            shutil.rmtree(half, ignore_errors=True)
    done = sorted((d for d in SAVES.iterdir() if d.is_dir() and not d.name.startswith(".")),
                  key=lambda d: _used(d / "saved.json"), reverse=True)
    for old in done[KEEP:]:
        if now - _used(old / "saved.json") > IN_USE_S:
            subprocess.run(["rm", "-rf", "--one-file-system", str(old)], timeout=300, check=False)


def _used(path: Path) -> float:
    """When path was last used (0: gone meanwhile, another up pruning too)."""
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
