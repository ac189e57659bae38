"""SPDK's vhost target as the harness runs it: which build, the command that starts it on the
fleet's host (hugepages from harness/resources/hugepages.py, its own hugetlbfs), its JSON-RPC client (the
PyPI `spdk` package), and its stop. The backend (vhost_user_spdk.py) decides what to ask of it.

The build is `make spdk`'s (scripts/spdk.sh, cached under the cache dir) or one the user names
(disk.spdk_build). The reactor polls its core at 100% unless started in interrupt mode."""
from __future__ import annotations

import os
from pathlib import Path

from spdk.rpc.client import JSONRPCClient, JSONRPCException
from tenacity import retry, retry_if_exception_type, stop_after_delay, wait_fixed

from harness.backends.base import daemon_alive, record_daemon, stop_daemon
from harness.common import paths
from harness.common.console import step
from harness.common.exits import StepFailed
from harness.hosts import long_step

CACHED_BUILD = paths.CACHE / "spdk" / "current"
BUILDER = paths.REPO / "scripts" / "spdk.sh"
BUILD_BOUND_S = 3600          # 1 min on the development machine's 2 cores; DPDK's packages first
VENDOR_GLOB = "spdk-*.tar.gz"
MEM_MIB = 256                 # the target's own DPDK memory (-s), taken from its hugepages
CORE_MASK = "0x1"             # one reactor, on the first core
START_WITHIN_S = 60
STOP_GRACE_S = 10


class SpdkError(StepFailed):
    pass


def vendored_source() -> Path | None:
    """The source scripts/spdk.sh builds from: $VTB_SPDK_SOURCE, else the archive CI and the
    development machine use (../shared/vendor beside the checkout)."""
    if given := os.environ.get("VTB_SPDK_SOURCE"):
        return Path(given) if Path(given).exists() else None
    found = sorted((paths.REPO.parent / "shared" / "vendor").glob(VENDOR_GLOB))
    return found[-1] if found else None


def build_dir(spdk_build: str) -> Path:
    return Path(spdk_build) if spdk_build else CACHED_BUILD


def version(spdk_build: str) -> str:
    """The build's SPDK version: its VERSION file (make spdk copies it in; an SPDK tree has it
    beside its build/ folder)."""
    build = build_dir(spdk_build)
    for f in (build / "VERSION", build.parent / "VERSION"):
        if f.is_file():
            return f.read_text().strip()
    return "unknown"


def missing_build(spdk_build: str) -> str | None:
    """Why no SPDK build can be used, with the fix; None when there is one."""
    build = build_dir(spdk_build)
    if (build / "bin" / "vhost").is_file():
        return None
    if spdk_build:
        return (f"disk.spdk_build={spdk_build} has no bin/vhost. Fix: point it at the build/ folder of an SPDK tree "
                "you ran `make` in, or unset it to use the build `make spdk` makes")
    if source := vendored_source():
        return f"SPDK is not built yet (source at hand: {source}). Fix: run `make spdk` (1-5 min once, then cached)"
    return ("no SPDK build and no SPDK source here. Fix: `VTB_SPDK_SOURCE=/path/to/spdk-v25.09.tar.gz make spdk` "
            "(an SPDK v25.09 archive or source tree), or set disk.spdk_build to an SPDK build/ folder, or "
            "disk.spdk_socket to a vhost target you run")


def build(host) -> None:
    """Builds the cached target with scripts/spdk.sh from the source at hand, saying so first (the
    backend's first use on a host where `make testbed up` built none)."""
    step(f"building SPDK's vhost target from {vendored_source()} on {host.label}: the first "
         "use of vhost-user-blk-spdk (1-5 min once, then cached)")
    long_step(host, [str(BUILDER)], "SPDK's build (scripts/spdk.sh)", BUILD_BOUND_S, SpdkError,
              "run `make spdk` and see where it stops")


def client(sock: str | Path, timeout: float = 30) -> JSONRPCClient:
    """A JSON-RPC client connected to the target's socket (raises SpdkError when none answers there)."""
    try:
        return JSONRPCClient(str(sock), timeout=timeout)
    except JSONRPCException as e:
        raise SpdkError(f"SPDK does not answer on {sock}: {e.message.splitlines()[-1]}") from None


def call(rpc, method: str, **params):
    """One RPC; SPDK's error comes back as SpdkError naming the method. Only the given fields
    are sent (spdk 26.x's bdev_aio_create adds `nowait`, which a v25.09 target rejects)."""
    try:
        return rpc.call(method, params or None)
    except JSONRPCException as e:
        raise SpdkError(f"SPDK {method} failed: {' '.join(e.message.split())[-300:]}") from None


class Target:
    """A vhost target the harness starts for one fleet; its files are in the fleet's run dir."""

    def __init__(self, host, run_dir: Path, build: Path, huge_dir: str, interrupt: bool):
        self.host, self.run_dir, self.build, self.huge_dir, self.interrupt = host, run_dir, build, huge_dir, interrupt

    @property
    def sock(self) -> Path:
        return self.run_dir / "spdk.sock"

    @property
    def pidfile(self) -> Path:
        return self.run_dir / "spdk.pid"

    @property
    def log(self) -> Path:
        return self.run_dir / "spdk.log"

    def argv(self) -> list[str]:
        return [str(self.build / "bin" / "vhost"), "-S", str(self.run_dir), "-m", CORE_MASK, "-s", str(MEM_MIB),
                "--no-pci", "-r", str(self.sock), "--huge-dir", self.huge_dir,
                *(["--interrupt-mode"] if self.interrupt else [])]

    def alive(self) -> bool:
        return daemon_alive(self.host, self.pidfile)

    def start(self) -> None:
        """Starts the target in a session of its own (it outlives this command: Terraform's hook)
        and waits until it answers."""
        self.host.run(["mkdir", "-p", str(self.run_dir)], timeout=30)
        script = ('lib=$1 log=$2 pid=$3; shift 3; LD_LIBRARY_PATH=$lib setsid "$@" >"$log" 2>&1 </dev/null & '
                  'echo $! >"$pid"')
        self.host.run(["sh", "-c", script, "sh", str(self.build / "lib"), str(self.log), str(self.pidfile),
                       *self.argv()], timeout=30)
        try:
            record_daemon(self.host, self.pidfile, "SPDK's vhost target")
            self._wait_answering()
        except Exception as e:
            said = self.log_tail()
            self.stop()
            raise SpdkError(f"SPDK's vhost target did not start on {self.host.label}: {e}\n{said}") from None

    @retry(retry=retry_if_exception_type(SpdkError), stop=stop_after_delay(START_WITHIN_S), wait=wait_fixed(0.5),
           reraise=True)
    def _wait_answering(self) -> None:
        if not self.alive():
            raise StepFailed("it exited")
        call(client(self.sock, timeout=10), "spdk_get_version")

    def log_tail(self, lines: int = 15) -> str:
        out = self.host.run(["tail", "-n", str(lines), str(self.log)], check=False, timeout=30)
        return out.stdout.decode(errors="replace").strip()

    def stop(self) -> None:
        """TERM, then KILL after a grace; removes its pid file and RPC socket. Safe to repeat."""
        stop_daemon(self.host, self.pidfile, STOP_GRACE_S, self.sock, Path(f"{self.sock}.lock"))
