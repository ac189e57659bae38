"""The fleet VMs that take no part in a point, suspended while it runs and resumed after (and
those a killed run left suspended, resumed): only domains that record vtb defined them."""
from __future__ import annotations

from contextlib import contextmanager

import libvirt

from harness.common import bounded
from harness.libvirt.libvirt_conn import DOMAIN_CALL_S, Unanswered, domain_call
from harness.libvirt.libvirt_xml import owner_of


def _listed(conn: libvirt.virConnect, flags: int) -> list[libvirt.virDomain]:
    return bounded.call(lambda: conn.listAllDomains(flags), "the list of domains from libvirtd",
                        DOMAIN_CALL_S["suspend"], "libvirtd is not answering", error=Unanswered)


def _ours(dom: libvirt.virDomain) -> bool:
    """The domain records that vtb defined it (libvirt_xml.owner_metadata): a user's `vtb-` one is left alone."""
    return owner_of(domain_call(dom, "XMLDesc", 0)) is not None


@contextmanager
def suspended(conn: libvirt.virConnect, prefixes: tuple[str, ...], keep: set[str]):
    """Suspends every running domain of vtb's (its owner record) whose name starts with one of
    `prefixes` and is not in `keep`, and resumes them afterwards, whatever happens in between. A
    suspend that does not return within its bound raises bounded.Unanswered naming the guest (the
    others are resumed)."""
    paused = []
    try:
        for dom in _listed(conn, libvirt.VIR_CONNECT_LIST_DOMAINS_RUNNING):
            if dom.name().startswith(prefixes) and dom.name() not in keep and _ours(dom):
                domain_call(dom, "suspend")
                paused.append(dom)
        yield [d.name() for d in paused]
    finally:
        for dom in paused:
            try:
                domain_call(dom, "resume")
            except libvirt.libvirtError:   # libvirt_conn.Unanswered too
                pass  # destroyed meanwhile, or stuck: the next point's suspend or `harness gc` finds it


def resume_paused(conn: libvirt.virConnect, prefixes: tuple[str, ...]) -> list[str]:
    """Resumes domains a killed run left suspended (a SIGKILL skips `suspended`'s resume): those of
    the prefixes that record vtb defined them (a user's paused `vtb-` domain stays as it is)."""
    resumed = []
    for dom in _listed(conn, libvirt.VIR_CONNECT_LIST_DOMAINS_PAUSED):
        if dom.name().startswith(prefixes) and _ours(dom):
            domain_call(dom, "resume")
            resumed.append(dom.name())
    return resumed
