"""Connections to a host's libvirtd that fail, rather than hang, when it stops answering.

A libvirt client detects a silent peer only through keepalive, and keepalive needs an event loop
in the client. Without one, a call to a nested host whose kernel locked up (seen here: RCU
stalls in a TCG L1) blocks forever; with it, the call raises within about 20 s."""
from __future__ import annotations

import hashlib
import shlex
import threading
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import libvirt

from harness.common import bounded, paths
from harness.common.files import write_atomic
from harness.common.ssh_options import ALIVE_COUNT, ALIVE_INTERVAL_S, CONNECT_TIMEOUT_S

KEEPALIVE_INTERVAL_S = 5
KEEPALIVE_COUNT = 3          # unanswered probes before the connection is closed and calls raise
CONNECT_S = 30               # opening a connection: ssh's own ConnectTimeout is 15 s of it

_lock = threading.Lock()
_loop: threading.Thread | None = None


def _run_events() -> None:
    while True:
        libvirt.virEventRunDefaultImpl()


def _ensure_event_loop() -> None:
    global _loop
    with _lock:
        if _loop is None:
            libvirt.virEventRegisterDefaultImpl()
            _loop = threading.Thread(target=_run_events, name="libvirt-events", daemon=True)
            _loop.start()


class Unanswered(libvirt.libvirtError, bounded.Unanswered):
    """A libvirt call that did not return within its bound: a libvirtError too, so that every place
    that handles libvirt's own failures (a libvirtd gone) handles it the same way."""

    def __init__(self, message: str, guest: str = ""):
        bounded.Unanswered.__init__(self, message, guest)
        self.err = None

    def get_error_message(self) -> str:
        return str(self)


def connect(uri: str) -> libvirt.virConnect:
    """connect(uri), with keepalive: a libvirtd that stops answering (stopped with SIGSTOP, its host
    wedged) keeps its socket open, a local one too, and only keepalive turns a call that waits on
    it (a guest-agent command mid-point) into an error. Bounded: a libvirtd that accepts but does
    not answer raises bounded.Unanswered."""
    _ensure_event_loop()
    target = _for_openssh(uri) if uri.startswith("qemu+ssh:") else uri
    conn = bounded.call(lambda: libvirt.open(target), f"a connection to libvirtd at {uri}", CONNECT_S,
                        f"libvirtd is not answering (stopped, or its host is gone). Fix: check that it runs and "
                        f"answers there (`virsh -c {uri} version`); `make testbed up` (re)starts this machine's",
                        error=Unanswered)
    if not uri.startswith("test:"):   # libvirt's test driver runs in this process: no peer to lose
        conn.setKeepAlive(KEEPALIVE_INTERVAL_S, KEEPALIVE_COUNT)
    return conn


# Domain calls take no timeout of their own. Their bounds: a QEMU whose guest has I/O that does not
# drain (a full Ceph cluster under librbd) does not pause until it drains, and holds a destroy.
DOMAIN_CALL_S = {"suspend": 30, "resume": 30, "destroy": 60, "shutdown": 30, "create": 120, "save": 300, "XMLDesc": 30,
                 "undefineFlags": 30}
DEFINE_S, RESTORE_S = 30, 300
NOT_ANSWERING = "its QEMU is not answering its monitor (I/O that does not drain blocks it), or libvirtd is not answering"


def domain_call(dom: libvirt.virDomain, action: str, *args):
    """dom.<action>(*args) within its bound (DOMAIN_CALL_S); bounded.Unanswered names the guest."""
    name = dom.name()   # kept by the client: no call to libvirtd
    return bounded.call(lambda: getattr(dom, action)(*args), f"{action} of {name}", DOMAIN_CALL_S[action],
                        NOT_ANSWERING, guest=name, error=Unanswered)


def define(conn: libvirt.virConnect, name: str, xml: str) -> libvirt.virDomain:
    """Defines a domain within DEFINE_S (libvirtd alone is asked)."""
    return bounded.call(lambda: conn.defineXML(xml), f"defining {name}", DEFINE_S, "libvirtd is not answering",
                        error=Unanswered)


def message(e: BaseException) -> str:
    """An error as one line: libvirt's own message for a libvirt error."""
    return e.get_error_message() if isinstance(e, libvirt.libvirtError) else str(e)


def restore_saved(conn: libvirt.virConnect, name: str, save_file: str, xml: str) -> None:
    """Restores a saved guest, running, within RESTORE_S; bounded.Unanswered names the guest."""
    bounded.call(lambda: conn.restoreFlags(save_file, xml, libvirt.VIR_DOMAIN_SAVE_RUNNING), f"restore of {name}",
                 RESTORE_S, NOT_ANSWERING, guest=name, error=Unanswered)


def unanswered(uri: str, within_s: float) -> str | None:
    """Why libvirtd at uri does not answer a call within within_s, or None. Bounded even where
    connecting itself hangs (the call runs in a thread left behind)."""
    answer: list[str | None] = []

    def ask() -> None:
        try:
            conn = connect(uri)
            conn.getLibVersion()
            conn.close()
            answer.append(None)
        except libvirt.libvirtError as e:
            answer.append(f"libvirtd at {uri}: {e.get_error_message()}")
    asker = threading.Thread(target=ask, daemon=True)
    asker.start()
    asker.join(within_s)
    return answer[0] if answer else f"libvirtd at {uri} did not answer within {within_s:g} s"


def _for_openssh(uri: str) -> str:
    """A qemu+ssh URI as libvirt's OpenSSH transport needs it: run through a small ssh wrapper
    (`command`) with the same bounds as every other ssh call (a host that does not answer fails the
    connection, rather than hanging it), and BatchMode (no prompt nobody sees). The `knownhosts`
    parameter (which the Terraform provider's own SSH client reads) becomes UserKnownHostsFile in
    it, so both clients check the host key against the same file."""
    parts = urlsplit(uri)
    query = dict(parse_qsl(parts.query))
    known = query.pop("knownhosts", None)
    query.pop("sshauth", None)   # the provider's; OpenSSH authenticates with keyfile
    options = [f"-o ConnectTimeout={CONNECT_TIMEOUT_S}", f"-o ServerAliveInterval={ALIVE_INTERVAL_S}",
               f"-o ServerAliveCountMax={ALIVE_COUNT}", "-o BatchMode=yes"]
    if known:
        options += [f"-o UserKnownHostsFile={shlex.quote(known)}", "-o StrictHostKeyChecking=yes"]
    script = f'#!/bin/sh\nexec ssh {" ".join(options)} "$@"\n'
    wrapper = paths.CACHE / "ssh" / f"ssh-{hashlib.sha256(script.encode()).hexdigest()[:12]}"
    if not wrapper.exists():
        wrapper.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(wrapper, script)
        wrapper.chmod(0o755)
    query["command"] = str(wrapper)
    return urlunsplit(parts._replace(query=urlencode(query, safe="/")))
