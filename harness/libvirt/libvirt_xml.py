"""Small helpers for the libvirt domain XML and QEMU command lines the harness writes: attribute
quoting (also valid inside the fleet module's XSLT), QEMU's option-value escaping,
<qemu:commandline> passthrough, and the owner record every domain vtb defines carries."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from xml.sax.saxutils import quoteattr

QEMU_NS = "http://libvirt.org/schemas/domain/qemu/1.0"
OWNER_NS = "urn:x-vtb:owner:1"
UNRECORDED = ("it has a vtb- name but no record that vtb defined it (no vtb:owner in its metadata); "
              "if it is yours to remove, `virsh destroy` and `virsh undefine` it")


def attr(value) -> str:
    """An XML attribute value for a literal element inside the XSLT (braces are AVT syntax there)."""
    return quoteattr(str(value).replace("{", "{{").replace("}", "}}"))


def qemu_opt(value) -> str:
    """A value inside QEMU's comma-separated option syntax (commas are doubled)."""
    return str(value).replace(",", ",,")


def qemu_commandline(*args: str) -> str:
    inner = "".join(f"<qemu:arg value={attr(a)}/>" for a in args)
    return f"<qemu:commandline xmlns:qemu={attr(QEMU_NS)}>{inner}</qemu:commandline>"


def owner_metadata(owner: str) -> str:
    """The <metadata> that records vtb made a domain, and for which fleet or host: gc and teardown
    remove a domain only when it carries this, never for its name alone."""
    return f"<metadata><vtb:owner xmlns:vtb={attr(OWNER_NS)} name={attr(owner)}/></metadata>"


def owner_of(domain_xml: str) -> str | None:
    """The owner a domain's XML records (see owner_metadata), or None: a domain vtb did not define."""
    try:
        element = ET.fromstring(domain_xml).find(f"metadata/{{{OWNER_NS}}}owner")
    except ET.ParseError:
        return None
    return None if element is None else element.get("name", "")
