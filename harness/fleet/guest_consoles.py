"""Guests' serial consoles, read on the host they run on, and kept before a teardown takes them:
what a lost guest said is the first thing its post-mortem needs."""
from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import libvirt

from harness.common.console import warn
from harness.common.files import write_atomic
from harness.libvirt.libvirt_conn import connect

CONSOLE_BYTES = 256 << 10   # the end of a console log that is kept


def text(host, dom: libvirt.virDomain) -> str:
    """The end of a guest's serial console log file."""
    try:
        src = ET.fromstring(dom.XMLDesc()).find("./devices/serial[@type='file']/source")
        if src is None:
            return "(no console log file)"
        out = host.run(["tail", "-c", str(CONSOLE_BYTES), src.get("path")], timeout=30, check=False)
    except (OSError, subprocess.SubprocessError, libvirt.libvirtError, ET.ParseError) as e:
        return f"(console log not readable: {e})"
    return out.stdout.decode(errors="replace") if out.returncode == 0 else "(console log not readable)"


def last_lines(console: str, lines: int = 20) -> str:
    return "\n".join(console.splitlines()[-lines:])


def tail(host, dom: libvirt.virDomain, lines: int = 20) -> str:
    """The last lines of a guest's serial console."""
    return last_lines(text(host, dom), lines) or "(console log empty)"


def keep(host, uri: str, prefixes: tuple[str, ...], dest: Path) -> dict[str, str]:
    """Copies the console of every guest whose name starts with one of the prefixes, and the host's
    own diagnostics (a nested host's console, kernel and libvirtd logs), into dest; returns them."""
    logs = {}
    try:
        conn = connect(uri)
        try:
            for dom in conn.listAllDomains():
                if dom.name().startswith(prefixes):
                    logs[f"{dom.name()}.log"] = text(host, dom)
        finally:
            conn.close()
    except libvirt.libvirtError as e:
        warn(f"could not read the guests' consoles: {e.get_error_message()}")
    logs.update(host.diagnostics())
    for name, content in logs.items():
        write_atomic(dest / name, content)
    return logs
