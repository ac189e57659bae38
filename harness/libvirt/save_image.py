"""A libvirt save image's header: the domain's name and UUID set in place.

Standard library only: `set_identity_on` runs this very file with python3 on the host that holds
the image (this machine or a nested host). libvirt offers no way to do it: a restore with another
UUID fails its ABI check, so the VM's name and UUID go into the header, and the restore's own XML
(checked by libvirt against the saved devices) brings the rest.

The layout (libvirt's qemu_saveimage.h, version 2): magic[16], then little-endian u32 version,
data_len, was_running, compressed, cookie_offset and 14 unused; then data_len bytes: the domain
XML, NUL, the cookie XML at cookie_offset, NUL, padding; then QEMU's migration stream.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

MAGIC = b"LibvirtQemudSave"
HEADER = 16 + 19 * 4


class SaveImageError(RuntimeError):   # not StepFailed: this file runs alone (see above); vm_start catches it
    pass


def set_identity(save: Path, name: str, uuid: str) -> None:
    with open(save, "r+b") as f:
        head = bytearray(f.read(HEADER))
        if head[:16] != MAGIC:
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


def set_identity_on(host, save: str, name: str, uuid: str) -> None:
    """set_identity on the host that holds the image: in-process here, through python3 elsewhere."""
    if host.is_this_machine:
        set_identity(Path(save), name, uuid)
        return
    script = Path(__file__).read_text() + "\nmain()\n"
    out = host.run(["python3", "-c", script, save, name, uuid], timeout=120, check=False)
    if out.returncode != 0:
        raise SaveImageError(out.stderr.decode(errors="replace").strip().splitlines()[-1])


def main() -> None:
    try:
        set_identity(Path(sys.argv[1]), sys.argv[2], sys.argv[3])
    except (SaveImageError, OSError, ValueError) as e:
        sys.exit(str(e))
