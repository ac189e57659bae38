"""Connections to a host's libvirtd that fail, rather than hang, when it stops answering.

A libvirt client detects a silent peer only through keepalive, and keepalive needs an event loop
in the client. Without one, a call to a nested host whose kernel locked up (seen here: RCU
stalls in a TCG L1) blocks forever; with it, the call raises within about 20 s."""
from __future__ import annotations

import threading

import libvirt

KEEPALIVE_INTERVAL_S = 5
KEEPALIVE_COUNT = 3          # unanswered probes before the connection is closed and calls raise

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


def connect(uri: str) -> libvirt.virConnect:
    """connect(uri), with keepalive on connections that cross a network (qemu+tcp, qemu+ssh);
    a local socket breaks by itself when libvirtd goes."""
    _ensure_event_loop()
    conn = libvirt.open(uri)
    if "+" in uri.split(":", 1)[0]:
        conn.setKeepAlive(KEEPALIVE_INTERVAL_S, KEEPALIVE_COUNT)
    return conn
