"""Small helpers for the libvirt domain XML and QEMU command lines the harness writes: attribute
quoting (also valid inside the fleet module's XSLT), QEMU's option-value escaping, and
<qemu:commandline> passthrough."""
from __future__ import annotations

from xml.sax.saxutils import quoteattr

QEMU_NS = "http://libvirt.org/schemas/domain/qemu/1.0"


def attr(value) -> str:
    """An XML attribute value for a literal element inside the XSLT (braces are AVT syntax there)."""
    return quoteattr(str(value).replace("{", "{{").replace("}", "}}"))


def qemu_opt(value) -> str:
    """A value inside QEMU's comma-separated option syntax (commas are doubled)."""
    return str(value).replace(",", ",,")


def qemu_commandline(*args: str) -> str:
    inner = "".join(f"<qemu:arg value={attr(a)}/>" for a in args)
    return f"<qemu:commandline xmlns:qemu={attr(QEMU_NS)}>{inner}</qemu:commandline>"
