"""Drives a guest through qemu-guest-agent (libvirt_qemu.qemuAgentCommand): no guest networking.

Every call has a timeout, and every error names the VM, so a hung guest never hangs the harness.
A guest agent is a node like a host (`run(argv, env, input, timeout, check)`), so a workload runs
the same way in a guest, on this machine or on a nested host.
"""
from __future__ import annotations

import base64
import json
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, TypeVar

import libvirt
import libvirt_qemu
from tenacity import retry, retry_if_exception, stop_after_delay, wait_fixed

from harness.common.bounded import heartbeat
from harness.common.cancel import CANCEL
from harness.common.exits import StepFailed
from harness.libvirt.libvirt_conn import connect, domain_call


class AgentError(StepFailed):
    pass


class AgentTimeout(AgentError, TimeoutError):
    """A guest command ran past its time limit (and was killed), or its agent never answered."""


# libvirt prints every error to stderr by default; ours are raised as exceptions instead.
libvirt.registerErrorHandler(lambda _ctx, _err: None, None)

@dataclass(frozen=True)
class ExecResult:
    exitcode: int
    stdout: bytes
    stderr: bytes


PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


class GuestAgent:
    # Status polls start fast and back off: most commands (a stat, a counter read) end within
    # milliseconds, and a point makes dozens of them; a long fio run is polled 4 times a second.
    FIRST_POLL_S = 0.005
    POLL_S = 0.25
    confines_tools = False   # a guest holds nothing but the disks under test: its tools run bare
    start_lead_s = 1.5       # a TCG guest just resumed takes about a second to page fio in

    def __init__(self, domain: libvirt.virDomain):
        self.domain = domain
        self.vm = domain.name()
        self.label = self.vm   # how messages name this node

    def run(self, argv: list[str], *, env: dict | None = None, input: bytes | None = None,
            timeout: float | None = None, check: bool = True) -> subprocess.CompletedProcess:
        """The node interface: argv in the guest, as subprocess.run would run it here (env, when
        given, is the whole environment; TimeoutExpired after `timeout`)."""
        try:
            # Through sh so that argv[0] is looked up in the PATH we pass, as subprocess would.
            res = self.exec("/bin/sh", ["-c", 'exec "$@"', "sh", *argv], env=env or {"PATH": PATH},
                            stdin=input, timeout=timeout or 24 * 3600)
        except AgentTimeout:
            raise subprocess.TimeoutExpired(argv, timeout or 0) from None
        proc = subprocess.CompletedProcess(argv, res.exitcode, res.stdout, res.stderr)
        if check:
            proc.check_returncode()
        return proc

    def clock_offset_s(self) -> float:
        """The guest's clock minus this machine's: a guest's clock starts from the emulated RTC,
        whole seconds off, and stands still while the guest is suspended. From the guest-get-time
        with the shortest round trip of three, to within half of it (a few ms here)."""
        samples = []
        for _ in range(3):
            sent = time.time()
            guest_ns = self.command("guest-get-time")
            received = time.time()
            samples.append((received - sent, guest_ns / 1e9 - (sent + received) / 2))
        return min(samples)[1]

    def command(self, execute: str, arguments: dict | None = None, timeout: int = 10, patient: bool = True) -> Any:
        """One agent command; `patient`: asked again, within AGENT_AWAY_S, while libvirt says the agent's
        channel is closed for now (the command was not sent)."""
        cmd = json.dumps({"execute": execute, **({"arguments": arguments} if arguments else {})})
        send = _sent_once_back if patient else libvirt_qemu.qemuAgentCommand
        try:
            reply = send(self.domain, cmd, max(1, int(timeout)), 0)
        except libvirt.libvirtError as e:
            raise AgentError(f"{self.vm}: guest agent {execute} failed: {e.get_error_message()}") from None
        return json.loads(reply).get("return", {})

    def ping(self, timeout: int = 2) -> bool:
        try:
            self.command("guest-ping", timeout=timeout, patient=False)   # its caller polls
            return True
        except AgentError:
            return False

    def wait_ready(self, timeout: float) -> float:
        """Seconds until the agent answered; raises naming the VM when it never does."""
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            if self.ping(timeout=2):
                return time.monotonic() - start
            self._still_running()
            time.sleep(0.2)
        raise AgentTimeout(f"{self.vm}: guest agent did not answer within {timeout:.0f} s")

    def _still_running(self) -> None:
        """Raises at once when waiting longer cannot help: the VM stopped, or its host's libvirtd is gone."""
        try:
            active = self.domain.isActive()
        except libvirt.libvirtError as e:
            raise AgentError(f"{self.vm}: its host's libvirtd stopped answering ({e.get_error_message()})") from None
        if not active:
            raise AgentError(f"{self.vm}: the VM stopped before its guest agent answered")

    def exec(self, path: str, args: list[str] = (), *, env: dict[str, str] | None = None,
             stdin: bytes | None = None, timeout: float = 60) -> ExecResult:
        """Runs a program in the guest and waits for it, returning its exit code and output."""
        arguments: dict = {"path": path, "arg": list(args), "capture-output": True}
        if env:
            arguments["env"] = [f"{k}={v}" for k, v in env.items()]
        if stdin is not None:
            arguments["input-data"] = base64.b64encode(stdin).decode()
        pid = self.command("guest-exec", arguments)["pid"]
        deadline = time.monotonic() + timeout
        poll_s = self.FIRST_POLL_S
        while True:
            status = self.command("guest-exec-status", {"pid": pid})
            if status.get("exited"):
                return ExecResult(
                    exitcode=status.get("exitcode", -status.get("signal", 0) or -1),
                    stdout=base64.b64decode(status.get("out-data", "")),
                    stderr=base64.b64decode(status.get("err-data", "")))
            if CANCEL.is_set():
                self.kill(pid)
                raise AgentError(f"{self.vm}: cancelled; killed {path} in the guest")
            if time.monotonic() > deadline:
                self.kill(pid)
                raise AgentTimeout(f"{self.vm}: {path} did not finish within {timeout:.0f} s; killed it")
            time.sleep(poll_s)
            poll_s = min(2 * poll_s, self.POLL_S)

    def kill(self, pid: int) -> None:
        """Stops a guest-exec'd process and everything under it (fio's jobs, a database server):
        SIGTERM first so that runners' traps unmount and stop servers, SIGKILL after a grace."""
        try:
            self.command("guest-exec", {"path": "/bin/sh", "arg": ["-c", KILL_TREE, "kill-tree", str(pid),
                                                                  str(KILL_GRACE_S)]})
        except AgentError:
            pass


KILL_GRACE_S = 30
# $1: a pid, $2: seconds of grace. Runs detached in the guest (nobody waits for it). The tree is
# taken before the TERM: a process whose parent ends is no longer under it (fio's jobs, once the
# runner has gone), and each one of it still alive after the grace is killed, with what it started.
KILL_TREE = ('tree() { for c in $(pgrep -P "$1"); do tree "$c"; done; echo "$1"; }\n'
             'pids=$(tree "$1")\n'
             'kill -TERM $pids 2>/dev/null\n'
             'for _ in $(seq 1 "$2"); do\n'
             '  alive=""; for p in $pids; do kill -0 "$p" 2>/dev/null && alive="$alive $p"; done\n'
             '  [ -n "$alive" ] || exit 0; sleep 1\n'
             'done\n'
             'kill -KILL $(for p in $alive; do tree "$p"; done) 2>/dev/null')


# libvirt's words while the guest has the agent's channel closed (its qemu-ga restarting, or a TCG
# guest too busy to reopen it at once): the command was not sent, so asking again is safe
AGENT_AWAY = "not available for now"
AGENT_AWAY_S = 30


def _sent_once_back(domain, cmd: str, timeout: int, flags: int) -> str:
    try:
        return libvirt_qemu.qemuAgentCommand(domain, cmd, timeout, flags)
    except libvirt.libvirtError as e:
        if AGENT_AWAY not in str(e):
            raise
    with heartbeat(f"the guest agent of {domain.name()} to take commands again (libvirt: {AGENT_AWAY})", AGENT_AWAY_S):
        return _asked_again(domain, cmd, timeout, flags)


@retry(retry=retry_if_exception(lambda e: isinstance(e, libvirt.libvirtError) and AGENT_AWAY in str(e)),
       stop=stop_after_delay(AGENT_AWAY_S), wait=wait_fixed(1), reraise=True)
def _asked_again(domain, cmd: str, timeout: int, flags: int) -> str:
    return libvirt_qemu.qemuAgentCommand(domain, cmd, timeout, flags)


# libvirt's words for an agent it gave up on: kept from a call that timed out on a stopped QEMU into
# the domain's next start, where the agent then never becomes available (seen with libvirt 9.0)
AGENT_ERROR_STATE = "not available due to an error"


def restart(dom: libvirt.virDomain) -> None:
    """Destroys the guest (if running) and starts it again, each call bounded; started a second time
    when libvirt carried its agent's error state into the first start."""
    if dom.isActive():
        domain_call(dom, "destroy")
    domain_call(dom, "create")
    try:
        GuestAgent(dom).command("guest-ping", timeout=1, patient=False)
    except AgentError as e:
        if AGENT_ERROR_STATE in str(e):
            domain_call(dom, "destroy")
            domain_call(dom, "create")


@contextmanager
def guests(uri: str, names: Iterable[str]) -> Iterator[list[GuestAgent]]:
    """The named guests' agents, over one libvirt connection held for the block."""
    conn = connect(uri)
    try:
        yield [GuestAgent(conn.lookupByName(n)) for n in names]
    finally:
        conn.close()


BARRIER_TIMEOUT_S = 60
T = TypeVar("T")
R = TypeVar("R")


def in_parallel(fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """fn over items at once (one guest or host slot each), every call released together from a
    barrier once all threads are ready. If one fails or the user interrupts, the others' commands
    are cancelled before waiting on them, so nothing keeps running."""
    items = list(items)
    if not items:
        return []
    pool = ThreadPoolExecutor(len(items))
    barrier = threading.Barrier(len(items))
    interrupted = False

    def together(item: T) -> R:
        barrier.wait(timeout=BARRIER_TIMEOUT_S)
        return fn(item)
    try:
        return list(pool.map(together, items))
    except BaseException as e:
        CANCEL.set()
        interrupted = isinstance(e, (KeyboardInterrupt, SystemExit))
        raise
    finally:
        pool.shutdown(wait=True)
        if not interrupted:
            CANCEL.clear()  # the next point starts afresh
