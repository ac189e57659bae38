"""A remote host reached over SSH: OpenSSH in BatchMode with key authentication for commands, and
libvirt's qemu+ssh transport for its libvirtd. A user's own KVM servers and the nested hosts of
`harness host nested up --count N` go through this same code.

A command runs in its own session on the host, whose id is kept in a file there, so that a
timeout or Ctrl-C here stops the whole remote process tree (SIGTERM, then SIGKILL), not only the
local ssh client."""
from __future__ import annotations

import os
import shlex
import stat
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar
from urllib.parse import quote

from harness.common.cancel import Cancelled
from harness.common.ssh_options import ALIVE_COUNT, ALIVE_INTERVAL_S, CONNECT_TIMEOUT_S
from harness.hosts import sessions
from harness.hosts.folders import state_dir_problem
from harness.hosts.local import STOP_GRACE_S, LocalHost

ANSWER_S = CONNECT_TIMEOUT_S + 5   # a first command's bound: ssh gives up connecting by itself before it
CONTROL_PERSIST_S = 60        # one multiplexed connection serves a point's many short commands
LOCAL = LocalHost()
# What ssh itself prints when it cannot run the command (exit 255 is also a remote command's own)
SSH_FAILURES = (b"ssh: ", b"Permission denied", b"Host key verification failed", b"Connection closed",
                b"Connection refused", b"Connection timed out", b"No route to host")


def libvirt_uri(user: str, address: str, port: int, identity: str | None, known_hosts: str | None) -> str:
    """qemu+ssh to a host's libvirtd (its unix socket, through sshd: key-authenticated, the host
    key checked), in the form both libvirt and the Terraform provider's own SSH client read."""
    params = {"keyfile": identity, "knownhosts": known_hosts, "sshauth": "privkey" if identity else None}
    query = "&".join(f"{k}={quote(v, safe='/')}" for k, v in params.items() if v)
    return f"qemu+ssh://{user}@{address}:{port}/system" + (f"?{query}" if query else "")


def control_dir() -> Path:
    """The private folder of ssh's control sockets. Whoever makes the socket at a shared path (such
    as /tmp) first receives every command and its input (a Ceph keyring among them) and can forge
    the replies, so it is this user's own, mode 0700, and checked before each use."""
    base = os.environ.get("XDG_RUNTIME_DIR") or ("/run" if os.geteuid() == 0 else str(Path.home() / ".cache"))
    folder = Path(base) / "vtb-ssh"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = folder.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        raise SshError(f"{folder}, the folder of ssh's control sockets, is not private to this user (owner uid "
                       f"{st.st_uid}, mode {stat.S_IMODE(st.st_mode):04o}): another user could read and forge "
                       f"what vtb sends to its hosts. Fix: remove {folder} (vtb makes it again, mode 0700)")
    return folder


@dataclass(frozen=True)
class SshHost:
    kind: ClassVar[str] = "ssh"
    is_this_machine: ClassVar[bool] = False
    confines_tools: ClassVar[bool] = True
    start_lead_s: ClassVar[float] = 1.5
    drives_are_users: ClassVar[bool] = True
    drive_size_field: ClassVar[str | None] = None
    keeps_guest_image: ClassVar[bool] = False
    no_restore: ClassVar[str | None] = "restores run on this machine only for now, not on an ssh host"
    rebuildable: ClassVar[bool] = False
    installs_packages: ClassVar[bool] = False
    name: str                     # the config's name for it ([[hosts]] name)
    target: str                   # user@address
    port: int = 22
    identity: str | None = None   # private key file here; unset = ssh's defaults
    known_hosts: str | None = None   # file with its host key; unset = ~/.ssh/known_hosts
    remote_dir: str = "/var/tmp/vtb"  # where fleets keep their pools and consoles there
    devices: tuple[str, ...] = ()    # block devices there the harness may use (the allowlist)
    l0_accel: str = "n/a"
    label: str = field(init=False, default="")

    def __post_init__(self):
        object.__setattr__(self, "label", f"host {self.name} ({self.target})")

    @property
    def drives(self) -> tuple[str, ...]:
        return self.devices

    @property
    def user(self) -> str:
        return self.target.partition("@")[0] if "@" in self.target else "root"

    @property
    def address(self) -> str:
        return self.target.partition("@")[2] or self.target

    @property
    def uri(self) -> str:
        """qemu+ssh, in the form both libvirt (OpenSSH underneath: keyfile, the known hosts through
        the ssh options file) and the Terraform provider (its own SSH client: keyfile, knownhosts)
        read."""
        return libvirt_uri(self.user, self.address, self.port, self.identity, self.known_hosts)

    def ssh_options(self) -> list[str]:
        opts = ["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}",
                "-o", f"ServerAliveInterval={ALIVE_INTERVAL_S}", "-o", f"ServerAliveCountMax={ALIVE_COUNT}",
                "-o", "ControlMaster=auto", "-o", f"ControlPath={control_dir()}/%C", "-o", f"ControlPersist={CONTROL_PERSIST_S}",
                "-p", str(self.port), "-l", self.user]
        if self.identity:
            opts += ["-i", self.identity, "-o", "IdentitiesOnly=yes"]
        if self.known_hosts:
            opts += ["-o", f"UserKnownHostsFile={self.known_hosts}"]
        return opts

    def _ssh(self, remote: str) -> list[str]:
        return ["ssh", *self.ssh_options(), self.address, "--", remote]

    def run(self, argv: list[str], *, env: dict | None = None, input: bytes | None = None,
            timeout: float | None = None, check: bool = True) -> subprocess.CompletedProcess:
        tag = f"/tmp/vtb-run-{uuid.uuid4().hex[:16]}.pid"   # unguessable; root's, in sticky /tmp
        command = shlex.join(["env", "-i", *(f"{k}={v}" for k, v in env.items()), *argv] if env is not None else argv)
        inner = tagged(tag, command)
        remote = (f"setsid -w sh -c {shlex.quote(inner)}; rc=$?; sh -c {shlex.quote(RELEASE_SCOPE)} - {tag}; "
                  f"rm -f {tag}; exit $rc")
        try:
            with sessions.recorded(ssh=self.descriptor(), tag=tag, command=argv[0]):   # for gc, after a SIGKILL here
                done = LOCAL.run(self._ssh(remote), input=input, timeout=timeout, check=False)
        except (subprocess.TimeoutExpired, Cancelled, KeyboardInterrupt):
            self.stop_session(tag)
            raise
        if done.returncode == 255 and any(m in done.stderr for m in SSH_FAILURES):
            raise SshError(f"{self.label}: {done.stderr.decode(errors='replace').strip()[-300:]}. Fix: check that "
                           f"sshd answers there on port {self.port} and accepts the key"
                           f"{' ' + self.identity if self.identity else ''} (try `{shlex.join(self._ssh('true'))}`)")
        done = subprocess.CompletedProcess(argv, done.returncode, done.stdout, done.stderr)
        if check:
            done.check_returncode()
        return done

    def stop_session(self, tag: str) -> bool:
        """SIGTERM to a command's session there, SIGKILL after the grace (what LocalHost does here);
        True when it was still running."""
        script = f"sh -c {shlex.quote(STOP_SESSION)} - {shlex.quote(tag)} {STOP_GRACE_S}"
        try:
            done = subprocess.run(self._ssh(script), capture_output=True, timeout=STOP_GRACE_S + 30)
        except subprocess.TimeoutExpired:
            return False
        return b"running" in done.stdout

    def clock_offset_s(self) -> float:
        """Its clock minus this machine's, from the `date` with the shortest round trip of three."""
        samples = []
        for _ in range(3):
            sent = time.time()
            remote = float(self.run(["date", "+%s.%N"], timeout=30).stdout)
            received = time.time()
            samples.append((received - sent, remote - (sent + received) / 2))
        return min(samples)[1]

    def descriptor(self) -> dict:
        return {"kind": self.kind, "name": self.name, "target": self.target, "port": self.port,
                "identity": self.identity, "known_hosts": self.known_hosts, "remote_dir": self.remote_dir,
                "devices": list(self.devices)}

    @classmethod
    def from_descriptor(cls, d: dict) -> "SshHost":
        return cls(name=d["name"], target=d["target"], port=d["port"], identity=d.get("identity"),
                   known_hosts=d.get("known_hosts"), remote_dir=d["remote_dir"], devices=tuple(d.get("devices", ())))

    def fleet_dir(self, local: Path, fleet: str) -> Path:
        return Path(self.remote_dir) / fleet

    def diagnostics(self) -> dict[str, str]:
        try:
            return {f"host-{self.name}-dmesg.log": self.run(["dmesg"], timeout=30, check=False).stdout.decode(errors="replace")}
        except (SshError, subprocess.SubprocessError) as e:
            return {f"host-{self.name}-dmesg.log": f"(not readable: {e})"}

    def unanswered(self) -> str | None:
        """Why the host does not run a first command over SSH within ANSWER_S, with the fix, or None:
        asked before any libvirt or Terraform work there (whose own clients would wait longer)."""
        argv = self._ssh("true")
        try:
            done = LOCAL.run(argv, timeout=ANSWER_S, check=False)
        except subprocess.TimeoutExpired:
            said = f"no answer within {ANSWER_S} s"
        else:
            if done.returncode == 0:
                return None
            said = "; ".join(done.stderr.decode(errors="replace").split("\n")).strip("; ")[-300:] \
                or f"ssh exit status {done.returncode}"
        return (f"[[hosts]] {self.name} at {self.address} (ssh {self.target}, port {self.port}) does not answer: "
                f"{said}. Fix: start that machine or its sshd, check its address, port and key (try "
                f"`{shlex.join(argv)}`), or remove it from [[hosts]]")

    def unsafe_state_dir(self) -> str | None:
        """Why this host's state dir may not be used, or None: see state_dir_problem."""
        return state_dir_problem(self, self.remote_dir, f"[[hosts]] {self.name}")

    def stopped(self) -> str | None:
        """Why the host cannot be reached, or None (a host that stopped answering is, to us, stopped)."""
        try:
            self.run(["true"], timeout=CONNECT_TIMEOUT_S + 15)
            return None
        except (SshError, subprocess.SubprocessError) as e:
            return f"{self.label} does not answer over SSH ({e})"


# A session's scope there: a cgroup of its own where the host has cgroup v2 with cgroup.kill (as
# hosts/scopes.py makes here), so that a stop reaches what left the session (fio's job processes).
CGROUP2 = """$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)"""


def tagged(tag: str, command: str) -> str:
    """A shell command that records its session in `tag` (its pid, its start time: field 22 of its
    stat, counted after the name in parentheses; and its scope, when the host can make one), then
    runs `command` in its place."""
    scope = f"{CGROUP2}/vtb/{shlex.quote(Path(tag).stem)}"
    return (f's={scope}; {{ mkdir -p "${{s%/*}}" && mkdir "$s" && [ -e "$s/cgroup.kill" ] && '
            f'echo $$ > "$s/cgroup.procs"; }} 2>/dev/null || {{ rmdir "$s"; s=; }} 2>/dev/null; '
            f"echo $$ $(sed 's/.*) //' /proc/$$/stat | cut -d' ' -f20) $s > {tag}; exec {command}")


# $1: a session's tag file. After the session ended by itself: what it left running on purpose
# (a daemon) moves to the caller's own cgroup, and the scope goes.
RELEASE_SCOPE = r'''read -r _ _ s < "$1" 2>/dev/null || exit 0
[ -n "$s" ] && [ -d "$s" ] || exit 0
home="${s%/vtb/*}$(sed -n 's/^0:://p' /proc/$$/cgroup)"
for i in 1 2 3 4 5; do
  for q in $(cat "$s/cgroup.procs"); do echo "$q" > "$home/cgroup.procs"; done 2>/dev/null
  rmdir "$s" 2>/dev/null && exit 0
done'''


# $1: a session's tag file ("pid start-time [scope]"), $2: the grace in seconds. Prints "running"
# when the session was still there. A live pid whose start time is not the recorded one is another
# process now (pids are reused): its group is not signalled, only the session's scope (where the
# host has one). A session whose first process is gone may still have members (a server it
# started): its group is signalled (a group id is not reused while the group has members), and its
# scope holds what left the group. A tag of an older vtb has no start time: its pid alone.
STOP_SESSION = r'''[ -f "$1" ] || exit 0
read -r p st s < "$1" || true
case "$p" in ''|*[!0-9]*) rm -f "$1"; exit 0;; esac
case "$s" in */vtb/vtb-run-*) [ -d "$s" ] || s=;; *) s=;; esac
now=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | cut -d' ' -f20)
if [ -n "$st" ] && [ -n "$now" ] && [ "$now" != "$st" ]; then p=; fi
[ -n "$p$s" ] || { rm -f "$1"; exit 0; }
members() { [ -n "$s" ] && cat "$s/cgroup.procs" 2>/dev/null; }
alive() { { [ -n "$p" ] && kill -s 0 -- "-$p" 2>/dev/null; } || [ -n "$(members)" ]; }
signal() { [ -n "$p" ] && kill -s "$1" -- "-$p" 2>/dev/null; for q in $(members); do kill -s "$1" "$q" 2>/dev/null; done; }
alive && echo running
signal TERM
i=0
while [ $i -lt "$2" ] && alive; do sleep 1; i=$((i+1)); done
signal KILL
if [ -n "$s" ]; then
  echo 1 > "$s/cgroup.kill"; i=0
  while [ -n "$(members)" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
  rmdir "$s"
fi 2>/dev/null
rm -f "$1"'''


class SshError(ConnectionError):
    pass


HOST = SshHost
