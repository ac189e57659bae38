"""A host is a libvirt URI plus a way to run commands there. Only this package knows which host it is.

Hooks that Terraform runs (backend and RAID host sides) get the host as a small descriptor, so
the same code serves this machine and a nested host alike."""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Protocol

from harness.hosts.local import LocalHost


class Node(Protocol):
    """Anything that runs commands: this machine, a nested host, a guest through its agent
    (harness.agent.GuestAgent). Workloads run on a node, whichever it is."""
    label: str                  # how messages name it ("this machine", "the nested host"; a guest: its name)

    def run(self, argv: list[str], *, env: dict | None = None, input: bytes | None = None,
            timeout: float | None = None, check: bool = True) -> subprocess.CompletedProcess:
        """Runs argv on the node (env, when given, is the whole environment). Raises
        subprocess.TimeoutExpired after `timeout`, CalledProcessError when check and it failed."""

    def clock_offset_s(self) -> float:
        """How far the node's clock is ahead of this machine's, in seconds (0 here): what puts the
        timestamps tools print on different nodes on one time line."""


class Host(Node, Protocol):
    """A node that serves a fleet: its libvirt URI, and what the harness made there."""
    uri: str
    name: str                   # "local" or "nested"
    drives: tuple[str, ...]     # block devices the harness created there (its own; always allowed)
    l0_accel: str               # the accelerator the host itself runs under ("n/a" for this machine)

    def descriptor(self) -> dict:
        """Enough to find this host again from another process (a Terraform hook)."""

    def diagnostics(self) -> dict[str, str]:
        """The host's own logs worth keeping with a run ({file name: text}; a nested host's console,
        kernel log and libvirtd log), so that what went wrong inside it outlives its teardown."""

    def stopped(self) -> str | None:
        """Why the host itself is no longer running (a nested host that reset), or None."""


def from_descriptor(d: dict) -> Host:
    if d["kind"] == "local":
        return LocalHost(uri=d["uri"])
    if d["kind"] == "nested":
        from harness.hosts.nested import NestedHost
        return NestedHost.load(Path(d["state_dir"]))
    raise ValueError(f"unknown host kind {d['kind']!r}")


def for_config(cfg) -> Host:
    """The host the config names, which must be up (harness/nested_host.py boots a nested one)."""
    if cfg.host.kind == "nested":
        from harness.hosts.nested import NestedHost
        return NestedHost.load(cfg.state_dir / "nested")
    return LocalHost()


__all__ = ["Host", "LocalHost", "Node", "for_config", "from_descriptor"]
