"""A host is a libvirt URI plus a way to run commands there. Only this package knows which host it is:
each kind (a module here that defines HOST) declares what it can do, and the core asks those
capabilities, never the kind's name.

Hooks that Terraform runs (backend and RAID host sides) get the host as a small descriptor, so
the same code serves this machine and a nested host alike."""
from __future__ import annotations

import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol

from harness.common import paths
from harness.common.bounded import heartbeat
from harness.common.exits import StepFailed
from harness.common.plugins import discover
from harness.hosts.local import LocalHost


class Node(Protocol):
    """Anything that runs commands: this machine, a nested host, a guest through its agent
    (harness.libvirt.agent.GuestAgent). Workloads run on a node, whichever it is."""
    label: str                  # how messages name it ("this machine", "the nested host"; a guest: its name)
    confines_tools: ClassVar[bool]   # the tools vtb runs there go into its sandbox (guest-agents/confine.sh):
                                     # a host holds more than the disk under test; a guest holds nothing else
    start_lead_s: ClassVar[float]    # how long before a shared start its tools are told to begin: the
                                     # command's way there and fio paged in (more where a round trip is long)

    def run(self, argv: list[str], *, env: dict | None = None, input: bytes | None = None,
            timeout: float | None = None, check: bool = True) -> subprocess.CompletedProcess:
        """Runs argv on the node (env, when given, is the whole environment). Raises
        subprocess.TimeoutExpired after `timeout`, CalledProcessError when check and it failed."""

    def clock_offset_s(self) -> float:
        """How far the node's clock is ahead of this machine's, in seconds (0 here): what puts the
        timestamps tools print on different nodes on one time line."""


class Host(Node, Protocol):
    """A node that serves a fleet: its libvirt URI, what the harness made there, and what it can do."""
    kind: ClassVar[str]                 # its key among the host kinds, and in its descriptor
    is_this_machine: ClassVar[bool]     # its files are this machine's (a prefilled file, a local daemon's socket)
    drives_are_users: ClassVar[bool]    # its drives are a user's devices, checked free before use (not vtb's own)
    drive_size_field: ClassVar[str | None]   # the setting that sizes its drives, where vtb makes them
    keeps_guest_image: ClassVar[bool]   # it keeps the guest image in its own pool, uploaded once
    no_restore: ClassVar[str | None]    # why fleets there boot rather than restore from a saved guest, or None
    rebuildable: ClassVar[bool]         # vtb booted it, so it boots it anew when it is lost
    installs_packages: ClassVar[bool]   # vtb installs there what a plug-in needs on its first use (hosts.packages)
    uri: str
    name: str                   # "local", "nested", or an ssh host's own name
    drives: tuple[str, ...]     # block devices there the harness may use: a nested host's own drives, an
                                # ssh host's allowlist (the fleet's data disks come from the first)
    l0_accel: str               # the accelerator the host itself runs under ("n/a" for this machine)

    def descriptor(self) -> dict:
        """Enough to find this host again from another process (a Terraform hook)."""

    def fleet_dir(self, local: Path, fleet: str) -> Path:
        """Where a fleet whose state is at `local` here keeps its files (pool, consoles) on the host:
        the same path on this machine and on a nested host, the host's own state dir on an ssh host."""

    def diagnostics(self) -> dict[str, str]:
        """The host's own logs worth keeping with a run ({file name: text}; a nested host's console,
        kernel log and libvirtd log), so that what went wrong inside it outlives its teardown."""

    def stopped(self) -> str | None:
        """Why the host itself is no longer running (a nested host that reset), or None."""


def long_step(host, argv: list[str], what: str, bound_s: float, error: type[StepFailed],
              fix: str) -> subprocess.CompletedProcess:
    """A long command on a host (an install, a build), said while it runs; `error` naming what was
    awaited when it does not end within the bound, or with its last words when it fails."""
    with heartbeat(what, bound_s):
        try:
            done = host.run(argv, check=False, timeout=bound_s)
        except subprocess.TimeoutExpired:
            raise error(f"{what} did not finish within {bound_s:g} s. Fix: {fix}") from None
    if done.returncode != 0:
        raise error(f"{what} failed (exit {done.returncode}): {last_words(done)}. Fix: {fix}")
    return done


def last_words(done: subprocess.CompletedProcess) -> str:
    """A command's last three lines of output (its errors, else what it printed), on one line."""
    said = (done.stderr or done.stdout or b"").decode(errors="replace").strip().splitlines()[-3:]
    return " / ".join(said) or "it said nothing"


def kinds() -> dict[str, type]:
    """Every host kind, by its name: the modules of this package that define HOST."""
    return discover(__name__, __path__, "HOST", key="kind")


def from_descriptor(d: dict) -> Host:
    if (kind := kinds().get(d["kind"])) is None:
        raise ValueError(f"unknown host kind {d['kind']!r}")
    return kind.from_descriptor(d)


def descriptor_problem(d: dict) -> str | None:
    """Why a host descriptor read back from a record (a plan's) is not one vtb writes, or None: a
    known kind, its paths absolute without '..', an ssh target user@address, a QEMU libvirt URI."""
    if d.get("kind") not in kinds():
        return f"host.kind {d.get('kind')!r} is no host kind"
    if not all(d.get(k) is None or paths.safe_path(d[k]) for k in ("state_dir", "remote_dir", "identity", "known_hosts")):
        return "host: a path is not absolute without '..'"
    if not all(paths.safe_path(dev) for dev in d.get("devices", ())):
        return "host.devices: an entry is not an absolute path without '..'"
    if "target" in d and not re.fullmatch(r"([a-z_][a-z0-9_.-]*@)?[A-Za-z0-9.:-]+", str(d["target"])):
        return "host.target is not user@address"
    if "uri" in d and not re.fullmatch(r"qemu[a-z+]*://[^\s]*", str(d["uri"])):
        return "host.uri is not a QEMU libvirt URI"
    return None


def remote(entry) -> Host:
    """The host of one [[hosts]] table."""
    from harness.hosts.ssh import SshHost
    return SshHost(name=entry.name, target=entry.ssh, port=entry.port,
                   identity=str(entry.identity) if entry.identity else None,
                   known_hosts=str(entry.known_hosts) if entry.known_hosts else None,
                   remote_dir=str(entry.state_dir), devices=tuple(entry.devices))


class HostsNotAnswering(StepFailed):
    """[[hosts]] that do not answer, or whose state dir is not safe: nothing was done on any host."""


@dataclass(frozen=True)
class Placement:
    """The hosts' own settings, as the config gives them (`Config.placement`): the kind of its one
    host, the [[hosts]] tables it spans instead (entries with name, ssh, port, identity,
    known_hosts, state_dir, devices), and this machine's state dir (a nested host's is in it)."""
    kind: str
    remotes: tuple = ()
    state_dir: Path = paths.DEFAULT_STATE_DIR


def remote_hosts(placement: Placement) -> list[Host]:
    """The [[hosts]] the config spans, reached over ssh (none without [[hosts]])."""
    return [remote(h) for h in placement.remotes]


def answers(placement: Placement) -> dict[str, str | None]:
    """Each [[hosts]] entry's answer to a first SSH command, by its label: why it does not answer,
    or None. All asked at once, each within ssh's own bound."""
    if not (entries := remote_hosts(placement)):
        return {}
    with ThreadPoolExecutor(len(entries)) as pool:
        return dict(zip((h.label for h in entries), pool.map(lambda h: h.unanswered(), entries)))


def check_answering(placement: Placement, asked: dict[str, str | None] | None = None) -> None:
    """Raises HostsNotAnswering naming every [[hosts]] entry that does not answer, or whose state
    dir is not safe (`asked`: their answers, when already asked): before any libvirt or Terraform work."""
    if not (entries := remote_hosts(placement)):
        return

    def answer(h) -> str | None:
        return (h.unanswered() if asked is None else asked.get(h.label)) or h.unsafe_state_dir()
    with ThreadPoolExecutor(len(entries)) as pool:
        reasons = [r for r in pool.map(answer, entries) if r]
    if reasons:
        raise HostsNotAnswering("\n".join(reasons))


def all_placed(placement: Placement) -> list[Host]:
    """Every host the fleet spans: the [[hosts]], or the one host."""
    return remote_hosts(placement) or [placed(placement)]


def name_placed(placement: Placement) -> str:
    """The name a run records of the hosts (the [[hosts]]' names, joined), without reaching them."""
    if placement.remotes:
        return ",".join(h.name for h in placement.remotes)
    if placement.kind == "nested":
        from harness.hosts.nested import NestedHost
        return NestedHost.name
    return LocalHost.name


def placed(placement: Placement) -> Host:
    """The host the fleet is on (the first of [[hosts]]), which must be up (harness/resources/nested_l1.py
    boots a nested one)."""
    if placement.remotes:
        return remote(placement.remotes[0])
    if placement.kind == "nested":
        from harness.hosts.nested import NestedHost
        return NestedHost.load(placement.state_dir / "nested")
    return LocalHost()


def this_machine_for(placement: Placement) -> Host | None:
    """The host when it is this machine (no nested host, no [[hosts]]), else None: what a check
    before a run may probe without reaching another machine."""
    return LocalHost() if not placement.remotes and placement.kind == LocalHost.kind else None


__all__ = ["Host", "LocalHost", "Node", "Placement", "all_placed", "from_descriptor", "name_placed", "placed", "remote",
           "remote_hosts", "this_machine_for"]
