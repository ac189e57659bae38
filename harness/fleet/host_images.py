"""The guest image kept inside a host, in a pool that lives as long as the host, instead of in
every fleet's own pool (the 580 MB root image took some 17 s per fleet under TCG, and nearly two
minutes through ssh into a nested host). Fleets' root overlays are backed by it. A nested host's
image carries it already (images/build.sh host), also when vtb drives that host over ssh; an ssh
host that does not hold it gets the image uploaded into each fleet's own pool, which goes with
the fleet, so vtb leaves nothing of it on a user's machine.

The pool has no `vtb-` prefix, so `gc` never takes it for a fleet's leftover: it goes with the L1."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path
from xml.sax.saxutils import escape

import libvirt

from harness.common.console import step
from harness.hosts import Host
from harness.hosts.files import stat_numbers
from harness.libvirt.libvirt_conn import connect

POOL = "images"
POOL_DIR = "/var/lib/vtb/images"
# the image's files (images/build.sh, which copies the same into the nested host's image); the
# generic kernel's only in the full image
FILES = {"rootfs": "rootfs.qcow2", "kernel": "vmlinuz", "initrd": "initrd.img",
         "kernel_generic": "vmlinuz-generic", "initrd_generic": "initrd-generic.img"}


def files_of(image_dir: Path) -> dict[str, str]:
    """{field: file name} of the FILES this image has."""
    return {field: name for field, name in FILES.items() if (image_dir / name).exists()}


def kept_on(host: Host, image_dir: Path) -> bool:
    """Whether fleets on this host back their roots with the image in its own pool: a nested host
    keeps it there; another host does where it holds this recipe's image already, whole (a nested
    host driven over ssh). This machine's fleets use the image where it is; others get it per fleet."""
    if host.keeps_guest_image or host.is_this_machine:
        return host.keeps_guest_image
    wanted = paths_on_host(image_dir)
    sizes = tuple((wanted[field], (image_dir / name).stat().st_size) for field, name in files_of(image_dir).items())
    key = (json.dumps(host.descriptor(), sort_keys=True), sizes)
    if key not in _HELD:   # asked once per host and image in a run: a command there costs seconds under TCG
        held = stat_numbers(host, "%s", [path for path, _ in sizes])
        _HELD[key] = all(held.get(path) == size for path, size in sizes)
    return _HELD[key]


_HELD: dict[tuple, bool] = {}


def recipe(image_dir: Path) -> str | None:
    """The image's recipe key (images/build.sh), None where it is not built."""
    path = image_dir / "recipe.sha"
    return path.read_text().strip() if path.exists() else None


def paths_on_host(image_dir: Path) -> dict[str, str]:
    """Where the image of `image_dir`'s recipe is (or will be) inside the host: named by the recipe."""
    key = recipe(image_dir)
    return {field: f"{POOL_DIR}/{key}-{name}" for field, name in files_of(image_dir).items()}


def ensure(host: Host, image_dir: Path) -> None:
    """Uploads what the host lacks of the image (a cut upload is found by its size and redone), and
    removes other recipes' images while no domain there could be using them."""
    wanted = paths_on_host(image_dir)
    held = stat_numbers(host, "%s", list(wanted.values()))
    conn = connect(host.uri)
    try:
        pool = _pool(conn)
        for field, name in files_of(image_dir).items():
            local = image_dir / name
            fmt = "qcow2" if name.endswith(".qcow2") else "raw"
            path = wanted[field]
            vol_name = Path(path).name
            vol = _lookup(pool, vol_name)
            if vol is not None and held.get(path) == local.stat().st_size:
                continue
            if vol is not None:
                vol.delete(0)
            step(f"uploading the guest image's {name} into the {host.name} host (once per image)")
            _upload(conn, pool, vol_name, local, fmt)
        if not conn.listAllDomains():
            for other in set(pool.listVolumes()) - {Path(p).name for p in wanted.values()}:
                _lookup(pool, other).delete(0)
    finally:
        conn.close()


def _pool(conn: libvirt.virConnect) -> libvirt.virStoragePool:
    try:
        pool = conn.storagePoolLookupByName(POOL)
    except libvirt.libvirtError:
        pool = conn.storagePoolDefineXML(f"<pool type='dir'><name>{POOL}</name><target><path>{POOL_DIR}</path>"
                                         "</target></pool>", 0)
        pool.build(0)
    if not pool.isActive():
        pool.create(0)
    pool.refresh(0)
    return pool


def _lookup(pool: libvirt.virStoragePool, name: str) -> libvirt.virStorageVol | None:
    try:
        return pool.storageVolLookupByName(name)
    except libvirt.libvirtError:
        return None


def _upload(conn: libvirt.virConnect, pool: libvirt.virStoragePool, name: str, local: Path, fmt: str) -> None:
    """As Terraform's provider uploads: a volume of the image's format and virtual size, then its bytes."""
    size = local.stat().st_size
    capacity = size
    if fmt == "qcow2":
        info = subprocess.run(["qemu-img", "info", "--output=json", str(local)], capture_output=True, text=True,
                              check=True, timeout=60)
        capacity = json.loads(info.stdout)["virtual-size"]
    vol = pool.createXML(f"<volume><name>{escape(name)}</name><capacity>{capacity}</capacity>"
                         f"<target><format type='{fmt}'/></target></volume>", 0)
    stream = conn.newStream(0)
    vol.upload(stream, 0, size, 0)
    try:
        with local.open("rb") as f:
            stream.sendAll(lambda _st, n, fh: fh.read(n), f)
        stream.finish()
    except BaseException:
        stream.abort()
        raise
