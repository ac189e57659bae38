"""Starting a fleet's domains, which Terraform defines stopped: restored from a booted template
(a libvirt save image) where that is allowed, else booted.

A template is one guest of the fleet, booted once, its agent answering, saved with its root
overlay. It is cached under CACHE/saves/<key>, the key a hash of everything the saved state must
match: the domain XML without what names one VM (name, UUID, file paths, its `vtb.name`), the
image, and the libvirt and QEMU versions. Each VM then gets:
- a root overlay with the template's blocks (the saved memory caches the root filesystem as the
  template left it; a fresh overlay of the base would contradict it);
- the save image with its own name and UUID in the header, restored with its own XML: libvirt
  refuses a restore whose devices do not match the saved ones (its ABI check), and the VM then
  boots instead, with the reason.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import libvirt

from harness import paths
from harness.agent import AgentError, GuestAgent
from harness.console import step, warn
from harness.store import write_atomic
from harness.workloads import guest_script

RECIPE = "2"            # bump when what a template holds, or how it is made, changes
KEEP_TEMPLATES = 8
QEMU_NS = "http://libvirt.org/schemas/domain/qemu/1.0"      # the most recently used templates kept in the cache
CAPTURE_TIMEOUT_S = 180


@dataclass
class Started:
    how: str            # "restored" or "booted"
    reason: str = ""    # why it was booted, when a restore was wanted
    uuid: str = ""      # the domain it describes (a replaced domain is another one)


def _strip_vm_identity(xml: str) -> ET.Element:
    """The domain XML as every VM of one shape has it: without name, UUID, MACs, file and socket
    paths, a slice's offset, its `vtb.name`, and what libvirt adds when a domain runs. The same
    goes for QEMU arguments a backend adds (a region's offset, a file or socket path)."""
    name = ET.fromstring(xml).findtext("name") or ""
    root = ET.fromstring(xml.replace(name, "{vm}") if name else xml)
    root.attrib.pop("id", None)
    for tag in ("name", "uuid", "seclabel", "resource"):
        for e in root.findall(tag):
            root.remove(e)
    for parent in root.iter():
        for child in list(parent):
            if child.tag in ("alias", "backingStore", "mac"):
                parent.remove(child)
    for tag in ("os/kernel", "os/initrd"):
        if (e := root.find(tag)) is not None:
            e.text = ""
    if (cmdline := root.find("os/cmdline")) is not None:
        cmdline.text = re.sub(r"\s*vtb\.name=\S+", "", cmdline.text or "")
    for e in root.iter("source"):
        for attr in ("file", "path", "dev", "volume", "pool", "name", "index", "host"):
            e.attrib.pop(attr, None)
    for e in root.iter("slice"):
        e.attrib.pop("offset", None)
    for e in root.iter(f"{{{QEMU_NS}}}arg"):
        e.set("value", re.sub(r"\b(offset=\d+|[\w.-]+=/[^,]*)", "", e.get("value", "")))
    return root


def template_key(inactive_xml: str, image: str, versions: str) -> str:
    """Which template a domain can be restored from: its shape, the image, libvirt's and QEMU's versions."""
    shape = ET.tostring(_strip_vm_identity(inactive_xml), encoding="unicode")
    return hashlib.sha256(f"{RECIPE}\n{image}\n{versions}\n{shape}".encode()).hexdigest()[:16]


# --- the save image's header (libvirt's qemu_saveimage.h, version 2) --------------------------
# magic[16] version data_len was_running compressed cookie_offset unused[14] (little-endian u32),
# then data_len bytes: the domain XML, NUL, the cookie XML at cookie_offset, NUL, padding.
_MAGIC = b"LibvirtQemudSave"
_HEADER = 16 + 19 * 4


class SaveImageError(RuntimeError):
    pass


class SaveRefused(RuntimeError):
    """libvirt would not save the booted guest: its shape cannot be restored (a non-migratable device)."""


def set_identity(save: Path, name: str, uuid: str) -> None:
    """Puts name and UUID in a save image's domain XML, in place. libvirt offers no way: a restore
    with another UUID fails its ABI check. The rest of the XML comes from the restore's own XML."""
    with open(save, "r+b") as f:
        head = bytearray(f.read(_HEADER))
        if head[:16] != _MAGIC:
            raise SaveImageError(f"{save} is not an uncompressed libvirt save image (its magic is {bytes(head[:16])!r})")
        version, data_len, _running, compressed, cookie = (int.from_bytes(head[16 + 4 * i:20 + 4 * i], "little")
                                                           for i in range(5))
        if version != 2 or compressed:
            raise SaveImageError(f"{save}: save image version {version}, compression {compressed}; "
                                 "only an uncompressed version 2 image is rewritten")
        data = f.read(data_len)
        xml = data[:data.index(b"\0")].decode()
        cookie_xml = data[cookie:data.index(b"\0", cookie) + 1] if cookie else b""
        xml = re.sub(r"<name>[^<]*</name>", f"<name>{name}</name>", xml, count=1)
        xml = re.sub(r"<uuid>[^<]*</uuid>", f"<uuid>{uuid}</uuid>", xml, count=1)
        blob = xml.encode() + b"\0"
        new_cookie = len(blob) if cookie else 0
        blob += cookie_xml
        if len(blob) > data_len:
            raise SaveImageError(f"{save}: the renamed XML does not fit the header's {data_len} bytes")
        head[32:36] = new_cookie.to_bytes(4, "little")
        f.seek(0)
        f.write(bytes(head) + blob + b"\0" * (data_len - len(blob)))


# --- the template cache ---------------------------------------------------------------------
def _template_dir(key: str) -> Path:
    return paths.CACHE / "saves" / key


def _root_path(conn: libvirt.virConnect, dom: libvirt.virDomain) -> str:
    """The file of the domain's first disk (the root overlay Terraform made)."""
    src = ET.fromstring(dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)).find("devices/disk/source")
    if src is None:
        raise SaveImageError(f"{dom.name()} has no root disk")
    if src.get("file"):
        return src.get("file")
    return conn.storagePoolLookupByName(src.get("pool")).storageVolLookupByName(src.get("volume")).path()


def _backing(path: str) -> str:
    info = json.loads(subprocess.run(["qemu-img", "info", "--force-share", "--output=json", path],
                                     capture_output=True, text=True, check=True).stdout)
    return info.get("full-backing-filename") or info.get("backing-filename") or ""


def _capture(conn: libvirt.virConnect, dom: libvirt.virDomain, key: str, image: str) -> Path:
    """Boots dom, waits for its agent, saves it (it stops) with its root overlay as template `key`."""
    t0 = time.monotonic()
    dom.create()
    agent = GuestAgent(dom)
    agent.wait_ready(CAPTURE_TIMEOUT_S)
    booted_s = time.monotonic() - t0
    agent.run(["sync"], timeout=60)
    final = _template_dir(key)
    work = final.with_name(f".{key}-{time.time_ns()}")
    work.mkdir(parents=True)
    try:
        try:
            dom.save(str(work / "state.save"))
        except libvirt.libvirtError as e:
            raise SaveRefused(e.get_error_message()) from None
        shutil.copyfile(_root_path(conn, dom), work / "root.qcow2")
        write_atomic(work / "template.json", json.dumps({
            "key": key, "image": image, "from_vm": dom.name(), "booted_s": round(booted_s, 2),
            "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "recipe": RECIPE,
            "xml": dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)}, indent=2))
        if final.exists():       # another bring-up made it meanwhile: theirs is as good
            shutil.rmtree(work)
        else:
            work.rename(final)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    _prune()
    return final


def _prune() -> None:
    """Keeps the KEEP_TEMPLATES most recently used templates, and removes captures left half-made
    (a bring-up killed while saving) once they are an hour old."""
    saves = paths.CACHE / "saves"
    dirs = [d for d in saves.iterdir() if d.is_dir()]
    for d in dirs:
        if d.name.startswith(".") and time.time() - d.stat().st_mtime > 3600:
            shutil.rmtree(d, ignore_errors=True)
    kept = sorted((d for d in dirs if not d.name.startswith(".")), key=lambda d: d.stat().st_mtime, reverse=True)
    for d in kept[KEEP_TEMPLATES:]:
        shutil.rmtree(d, ignore_errors=True)


def _refusal(key: str) -> str | None:
    f = _template_dir(key).with_suffix(".refused")
    return f.read_text().strip() if f.exists() else None


def _refuse(key: str, reason: str) -> None:
    write_atomic(_template_dir(key).with_suffix(".refused"), reason + "\n")


def _restore(conn: libvirt.virConnect, dom: libvirt.virDomain, template: Path, work_save: Path) -> None:
    """dom from the template: its root overlay gets the template's blocks over its own backing
    file, and the save image its name and UUID; libvirt restores it with dom's own XML."""
    root = _root_path(conn, dom)
    backing = _backing(root)
    tmp = Path(root).with_name(f"{Path(root).name}.restore")   # in the pool: gc removes it with the pool
    shutil.copyfile(template / "root.qcow2", tmp)
    subprocess.run(["qemu-img", "rebase", "-u", "-F", "qcow2", "-b", backing, str(tmp)], check=True,
                   capture_output=True, text=True)
    tmp.replace(root)
    set_identity(work_save, dom.name(), dom.UUIDString())
    conn.restoreFlags(str(work_save), dom.XMLDesc(libvirt.VIR_DOMAIN_XML_SECURE), libvirt.VIR_DOMAIN_SAVE_RUNNING)
    template.touch()   # recently used: kept by _prune


def start(conn: libvirt.virConnect, names: list[str], *, image: str, work_dir: Path,
          restore: str | None) -> dict[str, Started]:
    """Starts every domain of `names` that is not running, and says how, per domain it started.
    restore: None to restore where allowed, else the reason every VM boots (the config, a remote host)."""
    doms = [conn.lookupByName(n) for n in names]
    stopped = [d for d in doms if not d.isActive()]
    started: dict[str, Started] = {}
    if restore is not None:
        for d in stopped:
            d.create()
            started[d.name()] = Started("booted", restore)
    else:
        versions = f"libvirt {conn.getLibVersion()} qemu {conn.getVersion()}"
        groups: dict[str, list[libvirt.virDomain]] = {}
        for d in stopped:
            groups.setdefault(template_key(d.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE), image, versions), []).append(d)
        for key, group in groups.items():
            started.update(_start_group(conn, key, group, image, work_dir))
    for d in doms:
        if d.name() in started:
            started[d.name()].uuid = d.UUIDString()
    return started


def _start_group(conn: libvirt.virConnect, key: str, group: list, image: str, work_dir: Path) -> dict[str, Started]:
    """One shape's VMs: from its template (made from the first of them when there is none)."""
    def boot_all(doms, reason: str) -> dict[str, Started]:
        for d in doms:
            if not d.isActive():
                d.create()
        return {d.name(): Started("booted", reason) for d in doms}

    if reason := _refusal(key):
        step(f"  VMs boot: a restore of this shape was refused before ({reason})")
        return boot_all(group, reason)
    template = _template_dir(key)
    if not (template / "state.save").exists():
        step(f"  no booted template for this VM shape yet: booting {group[0].name()} and saving it ({key})")
        try:
            template = _capture(conn, group[0], key, image)
        except (SaveRefused, libvirt.libvirtError, AgentError, OSError, subprocess.CalledProcessError) as e:
            reason = f"saving a booted guest failed: {_message(e)}"
            warn(f"{reason}; the fleet boots")
            if isinstance(e, SaveRefused):   # libvirt's verdict on the shape, not a passing failure
                _refuse(key, reason)
            return boot_all(group, reason)
    work_save = work_dir / "restore.save"
    started: dict[str, Started] = {}
    shutil.copyfile(template / "state.save", work_save)
    try:
        for d in group:
            try:
                _restore(conn, d, template, work_save)
                started[d.name()] = Started("restored")
            except (libvirt.libvirtError, SaveImageError, OSError, subprocess.CalledProcessError) as e:
                reason = f"restoring {d.name()} failed: {_message(e)}"
                warn(f"{reason}; it boots")
                if not started:          # the first one already failed: the others would too
                    if isinstance(e, libvirt.libvirtError):
                        _refuse(key, reason)
                    return boot_all(group, reason)
                d.create()
                started[d.name()] = Started("booted", reason)
    finally:
        work_save.unlink(missing_ok=True)
    return started


def _message(e: BaseException) -> str:
    if isinstance(e, libvirt.libvirtError):
        return e.get_error_message()
    if isinstance(e, subprocess.CalledProcessError):
        return f"{' '.join(map(str, e.cmd))}: {(e.stderr or '').strip()}"
    return str(e)


# --- after a restore: each guest its own machine ---------------------------------------------
def personalize(agent: GuestAgent, size_bytes: int, locator: str) -> None:
    """A restored guest made its own: the clock set to this machine's, its hostname, its RNG
    re-seeded, the template's cached disk blocks dropped, and its data disk checked to be the one
    it was given (found by its locator, of the size of its slice)."""
    agent.command("guest-set-time", {"time": time.time_ns()})
    out = agent.run(["/bin/sh", "-c", guest_script(paths.GUEST_AGENTS / "personalize.sh"), "personalize", locator,
                     agent.vm], input=os.urandom(512), timeout=60, check=False)
    if out.returncode != 0:
        raise AgentError(f"{agent.vm}: making the restored guest its own failed: "
                         f"{out.stderr.decode(errors='replace').strip()}")
    seen = int(out.stdout.split()[-1])
    if seen != size_bytes:
        raise AgentError(f"{agent.vm}: its data disk ({locator}) has {seen} bytes and its slice {size_bytes}: "
                         "the restored guest does not see its own disk")
