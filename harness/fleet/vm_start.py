"""Starting a fleet's domains: restored from a booted template (a libvirt save image) where that
is allowed, else booted.

A template is one guest of the fleet, booted once, its agent answering, saved with its root
overlay. It is cached on the fleet's host under SAVES/<key>, the key a hash of everything the
saved state must match: the domain XML without what names one VM (name, UUID, file paths, its
`vtb.name`), the image, and the libvirt and QEMU versions. Each VM then gets:
- a root overlay with the template's blocks (the saved memory caches the root filesystem as the
  template left it; a fresh overlay of the base would contradict it);
- the save image with its own name and UUID in the header (`save_image.py`), restored with its
  own XML: libvirt refuses a restore whose devices do not match the saved ones (its ABI check),
  and the VM then boots instead, with the reason.
Files are handled through the host (`host.run`), so that a nested host's L2 fleet can be restored
the same way, from templates kept inside it (Testbed turns that off for now: see its
`_why_no_restore`).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass

import libvirt

from harness.common import paths
from harness.common.bounded import heartbeat
from harness.common.console import step, warn
from harness.common.exits import StepFailed
from harness.common.guest_scripts import guest_script
from harness.hosts import Host
from harness.libvirt.agent import AgentError, GuestAgent
from harness.libvirt.libvirt_conn import Unanswered, domain_call, message, restore_saved
from harness.libvirt.save_image import SaveImageError, set_identity_on

RECIPE = "2"            # bump when what a template holds, or how it is made, changes
KEEP_TEMPLATES = 12     # the most recently used templates kept on a host
SAVES = paths.CACHE / "saves"   # on the fleet's host (this machine, or inside a nested host)
QEMU_NS = "http://libvirt.org/schemas/domain/qemu/1.0"
CAPTURE_TIMEOUT_S = 180
FIRST_SIGHTING = "the first bring-up of this one-VM shape here (a template is saved the next time)"


class TemplateError(StepFailed):
    """A file step of making or using a template failed on the host."""


class WrongRestore(AgentError):
    """A restored guest that does not see the machine it was restored into (its data disk, its size)."""


class SaveRefused(StepFailed):
    """libvirt would not save the booted guest: its shape cannot be restored (a non-migratable device)."""


@dataclass
class Started:
    how: str            # "restored" or "booted"
    reason: str = ""    # why it was booted, when a restore was wanted
    uuid: str = ""      # the domain it describes (a replaced domain is another one)
    template: str = ""  # the template it was restored from


def _strip_vm_identity(xml: str) -> ET.Element:
    """The domain XML as every VM of one shape has it: without name, UUID, owner record, MACs, file
    and socket paths, a slice's offset, its `vtb.name`, and what libvirt adds when a domain runs. The same
    goes for QEMU arguments a backend adds (a region's offset, a file or socket path)."""
    name = ET.fromstring(xml).findtext("name") or ""
    root = ET.fromstring(xml.replace(name, "{vm}") if name else xml)
    root.attrib.pop("id", None)
    for tag in ("name", "uuid", "seclabel", "resource", "metadata"):
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


def template_key(inactive_xml: str, image: str, versions: str, guest_view: str = "") -> str:
    """Which template a domain can be restored from: its shape, what its guest sees that the XML does
    not say (a disk served from outside QEMU: its size and settings, as its backend declares them), the
    image, libvirt's and QEMU's versions."""
    shape = ET.tostring(_strip_vm_identity(inactive_xml), encoding="unicode")
    return hashlib.sha256(f"{RECIPE}\n{image}\n{versions}\n{guest_view}\n{shape}".encode()).hexdigest()[:16]


# --- files on the fleet's host ---------------------------------------------------------------
def _sh(host: Host, script: str, *args: str, input: bytes | None = None, timeout: float = 300) -> str:
    out = host.run(["/bin/sh", "-c", script, "sh", *args], input=input, timeout=timeout, check=False)
    if out.returncode != 0:
        raise TemplateError(f"{host.label}: `{script.split(';')[0]}` failed: {out.stderr.decode(errors='replace').strip()}")
    return out.stdout.decode()


def _root_path(conn: libvirt.virConnect, dom: libvirt.virDomain) -> str:
    """The file of the domain's first disk (the root overlay Terraform made)."""
    src = ET.fromstring(dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)).find("devices/disk/source")
    if src is None:
        raise TemplateError(f"{dom.name()} has no root disk")
    if src.get("file"):
        return src.get("file")
    return conn.storagePoolLookupByName(src.get("pool")).storageVolLookupByName(src.get("volume")).path()


def _capture(host: Host, conn: libvirt.virConnect, dom: libvirt.virDomain, key: str, image: str) -> None:
    """Boots dom, waits for its agent, saves it (it stops) with its root overlay as template `key`."""
    t0 = time.monotonic()
    domain_call(dom, "create")
    agent = GuestAgent(dom)
    with heartbeat(f"{dom.name()} to boot (its template is saved from it)", CAPTURE_TIMEOUT_S):
        agent.wait_ready(CAPTURE_TIMEOUT_S)
    booted_s = time.monotonic() - t0
    agent.run(["sync"], timeout=60)
    final, work = f"{SAVES}/{key}", f"{SAVES}/.{key}-{time.time_ns()}"
    _sh(host, 'mkdir -p "$1"', work)
    try:
        try:
            domain_call(dom, "save", f"{work}/state.save")
        except Unanswered:
            raise   # a wait, not libvirt's verdict on the shape
        except libvirt.libvirtError as e:
            raise SaveRefused(e.get_error_message()) from None
        about = json.dumps({"key": key, "image": image, "from_vm": dom.name(), "booted_s": round(booted_s, 2),
                            "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "recipe": RECIPE,
                            "xml": dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)}, indent=2)
        _sh(host, 'cp "$1" "$2/root.qcow2" && cat > "$2/template.json"', _root_path(conn, dom), work,
            input=about.encode())
        # Another bring-up that made it meanwhile keeps its own: as good as this one.
        _sh(host, 'if [ -e "$2" ]; then rm -rf "$1"; else mv "$1" "$2"; fi', work, final)
    except BaseException:
        host.run(["rm", "-rf", work], timeout=120, check=False)
        raise
    # The most recently used KEEP_TEMPLATES stay, captures left half-made (a bring-up killed while
    # saving) go once an hour old, and marks of one-VM shapes seen once go after a month.
    host.run(["/bin/sh", "-c", f'cd "$1" && find . -maxdepth 1 -name ".*-*" -type d -mmin +60 -exec rm -rf {{}} + ; '
              f'find . -maxdepth 1 -name "*.seen" -mtime +30 -delete; '
              f'ls -1dt -- */ | tail -n +{KEEP_TEMPLATES + 1} | xargs -r rm -rf --', "sh", str(SAVES)],
             timeout=120, check=False)


def _refusal(host: Host, key: str) -> str | None:
    out = host.run(["cat", f"{SAVES}/{key}.refused"], timeout=60, check=False)
    return out.stdout.decode().strip() if out.returncode == 0 else None


def _refuse(host: Host, key: str, reason: str) -> None:
    _sh(host, 'cat > "$1"', f"{SAVES}/{key}.refused", input=reason.encode() + b"\n")


def _restore(host: Host, conn: libvirt.virConnect, dom: libvirt.virDomain, template: str, work_save: str) -> None:
    """dom from the template: its root overlay gets the template's blocks over its own backing
    file, and the save image its name and UUID; libvirt restores it with dom's own XML."""
    root = _root_path(conn, dom)
    info = json.loads(_sh(host, 'qemu-img info --force-share --output=json "$1"', root))
    backing = info.get("full-backing-filename") or info.get("backing-filename")
    if not backing:
        raise TemplateError(f"{dom.name()}: its root disk {root} has no backing file")
    # The copy sits in the pool beside the root disk, so gc removes it with the pool if we die here.
    _sh(host, 'cp "$1/root.qcow2" "$2.restore" && qemu-img rebase -u -F qcow2 -b "$3" "$2.restore" && '
              'mv "$2.restore" "$2" && touch "$1"', template, root, backing)
    set_identity_on(host, work_save, dom.name(), dom.UUIDString())
    restore_saved(conn, dom.name(), work_save, domain_call(dom, "XMLDesc", libvirt.VIR_DOMAIN_XML_SECURE))


def start(host: Host, conn: libvirt.virConnect, guest_views: dict[str, str], *, image: str, work_dir: str,
          restore: str | None) -> dict[str, Started]:
    """Starts every domain named in `guest_views` (each VM's view of its disk, as its backend
    declares it) that is not running, and says how, per domain it started.
    restore: None to restore where allowed, else the reason every VM boots (the config, the host)."""
    doms = [conn.lookupByName(n) for n in guest_views]
    stopped = [d for d in doms if not d.isActive()]
    started: dict[str, Started] = {}
    if restore is not None:
        for d in stopped:
            domain_call(d, "create")
            started[d.name()] = Started("booted", restore)
    else:
        versions = f"libvirt {conn.getLibVersion()} qemu {conn.getVersion()}"
        groups: dict[str, list[libvirt.virDomain]] = {}
        for d in stopped:
            key = template_key(d.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE), image, versions, guest_views[d.name()])
            groups.setdefault(key, []).append(d)
        for key, group in groups.items():
            started.update(_start_group(host, conn, key, group, image, work_dir))
    for d in doms:
        if d.name() in started:
            started[d.name()].uuid = d.UUIDString()
    return started


def _start_group(host: Host, conn: libvirt.virConnect, key: str, group: list, image: str,
                 work_dir: str) -> dict[str, Started]:
    """One shape's VMs: from its template (made from the first of them when there is none)."""
    def boot_all(reason: str) -> dict[str, Started]:
        for d in group:
            if not d.isActive():
                domain_call(d, "create")
        return {d.name(): Started("booted", reason) for d in group}

    if reason := _refusal(host, key):
        step(f"  VMs boot: a restore of this shape was refused before ({reason})")
        return boot_all(reason)
    template = f"{SAVES}/{key}"
    if host.run(["test", "-f", f"{template}/state.save"], timeout=60, check=False).returncode != 0:
        if len(group) == 1 and host.run(["test", "-f", f"{SAVES}/{key}.seen"], timeout=60, check=False).returncode != 0:
            # Saving and restoring costs a few seconds more than a boot: a one-VM shape pays that
            # only once it comes up again (most shapes a sweep makes come up once).
            _sh(host, 'mkdir -p "$1" && touch "$1/$2.seen"', str(SAVES), key)
            step(f"  a one-VM shape new here: {group[0].name()} boots, and is saved as a template if it comes up again")
            return boot_all(FIRST_SIGHTING)
        step(f"  no booted template for this VM shape yet: booting {group[0].name()} and saving it ({key})")
        try:
            _capture(host, conn, group[0], key, image)
        except (SaveRefused, TemplateError, libvirt.libvirtError, AgentError) as e:
            reason = f"saving a booted guest failed: {message(e)}"
            warn(f"{reason}; the fleet boots")
            if isinstance(e, SaveRefused):   # libvirt's verdict on the shape, not a passing failure
                _refuse(host, key, reason)
            return boot_all(reason)
    work_save = f"{work_dir}/restore.save"
    started: dict[str, Started] = {}
    try:
        _sh(host, 'cp "$1/state.save" "$2"', template, work_save)
    except TemplateError as e:
        warn(f"{e}; the fleet boots")
        return boot_all(str(e))
    try:
        for d in group:
            try:
                _restore(host, conn, d, template, work_save)
                started[d.name()] = Started("restored", template=key)
            except (libvirt.libvirtError, SaveImageError, TemplateError) as e:
                reason = f"restoring {d.name()} failed: {message(e)}"
                warn(f"{reason}; it boots")
                if not started:          # the first one already failed: the others would too
                    if isinstance(e, libvirt.libvirtError) and not isinstance(e, Unanswered):   # a verdict, not a wait
                        _refuse(host, key, reason)
                    return boot_all(reason)
                domain_call(d, "create")
                started[d.name()] = Started("booted", reason)
    finally:
        host.run(["rm", "-f", work_save], timeout=60, check=False)
    return started


# --- after a restore: each guest its own machine ---------------------------------------------
def personalize(agent: GuestAgent, size_bytes: int, locator: str) -> None:
    """A restored guest made its own: the clock set to this machine's, its hostname, its RNG
    re-seeded, the template's cached disk blocks dropped, and its data disk checked to be the one
    it was given (found by its locator, of the size of its slice)."""
    agent.command("guest-set-time", {"time": time.time_ns()})
    out = agent.run(["/bin/sh", "-c", guest_script(paths.GUEST_AGENTS / "personalize.sh"), "personalize", locator,
                     agent.vm], input=os.urandom(512), timeout=60, check=False)
    if out.returncode != 0:
        raise WrongRestore(f"{agent.vm}: making the restored guest its own failed: "
                           f"{out.stderr.decode(errors='replace').strip()}")
    seen = int(out.stdout.split()[-1])
    if seen != size_bytes:
        raise WrongRestore(f"{agent.vm}: its data disk ({locator}) has {seen} bytes and its slice {size_bytes}: "
                           "the restored guest does not see its own disk")


def boot_afresh(host: Host, conn: libvirt.virConnect, name: str, template: str) -> None:
    """A restored guest that proved wrong: its template thrown away (the next start saves a fitting
    one), the domain stopped and its root overlay emptied over its own backing file, as Terraform
    made it, so that it can boot."""
    host.run(["rm", "-rf", f"{SAVES}/{template}"], timeout=120, check=False)
    dom = conn.lookupByName(name)
    if dom.isActive():
        domain_call(dom, "destroy")
    root = _root_path(conn, dom)
    info = json.loads(_sh(host, 'qemu-img info --force-share --output=json "$1"', root))
    backing = info.get("full-backing-filename") or info.get("backing-filename")
    if not backing:
        raise TemplateError(f"{name}: its root disk {root} has no backing file")
    _sh(host, 'qemu-img create -q -f qcow2 -F "$4" -b "$2" "$1.fresh" "$3" && mv "$1.fresh" "$1"',
        root, backing, str(info["virtual-size"]), info.get("backing-filename-format") or "qcow2")
