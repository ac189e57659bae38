"""sysbench OLTP on MariaDB: one point = a fresh filesystem, datadir and server on the data disk,
sysbench prepare and run, then the server stopped. Runs in guests via the agent and on the host
(on a loop device over the same slice of the host device), with the same runner script."""
from __future__ import annotations

import re
import subprocess
from dataclasses import asdict, dataclass

from harness.common import paths
from harness.common.exits import StepFailed
from harness.common.guest_scripts import guest_script
from harness.hosts import Node
from harness.libvirt.agent import PATH, GuestAgent, guests, in_parallel
from harness.results.columns import B, I, N, S, column
from harness.results.outputs import Output
from harness.workloads import runner_cpu_s

RUNNER = paths.GUEST_AGENTS / "run-mysql.sh"
HOST_PACKAGES = ("mariadb-server-core", "mariadb-client-core", "sysbench")   # the physical side's server and client
ROW_BYTES = 250          # sysbench sbtest row plus its share of the indexes, for sizing only
PAGE_BYTES = {"4k": 4096, "8k": 8192, "16k": 16384, "32k": 32768, "64k": 65536}


# The columns its samples add to the core's (harness/results/columns.py)
COLUMNS = (("sysbench on MariaDB (mysql, mysql-raid)", [
    column("db_test", S, "sysbench test"),
    column("db_threads", I, "client threads"),
    column("db_page_size", S, "innodb_page_size"),
    column("db_buffer_pool_fraction", N, "buffer pool over the data", "fraction"),
    column("db_buffer_pool_bytes", I, "buffer pool", "B"),
    column("db_buffer_pool_clamped", B, "MariaDB's minimum applied"),
    column("db_key_block_size", I, "table compression (0: none)", "KiB"),
    column("db_tables", I, "tables"),
    column("db_table_size", I, "rows per table"),
    column("db_runtime_s", I, "sysbench run time", "s"),
    column("db_estimated_data_bytes", I, "the data's estimated size", "B"),
    column("db_filesystem", S, "the datadir's filesystem"),
]),)


class SysbenchError(StepFailed):
    def __init__(self, message: str, server_log: str = "", server_config: str = ""):
        super().__init__(message)
        self.server_log = server_log
        self.server_config = server_config


@dataclass(frozen=True)
class DbPoint:
    test: str
    threads: int
    page_size: str
    buffer_pool_fraction: float
    key_block_size: int      # 0 = uncompressed
    tables: int
    table_size: int
    runtime_s: int
    filesystem: str

    @property
    def data_bytes(self) -> int:
        return self.tables * self.table_size * ROW_BYTES

    @property
    def buffer_pool_bytes(self) -> int:
        """The fraction of the data, in whole MiB, but at least what MariaDB accepts for the page size
        (it refuses a 16k-page server with less than 6 MiB); `buffer_pool_clamped` says when."""
        return max(self._min_pool, int(self.data_bytes * self.buffer_pool_fraction) >> 20 << 20)

    @property
    def _min_pool(self) -> int:
        return max(6 << 20, PAGE_BYTES[self.page_size] * 384)

    def label(self) -> str:
        comp = f"-kbs{self.key_block_size}" if self.key_block_size else ""
        return (f"{self.test}-t{self.threads}-p{self.page_size}-bp{self.buffer_pool_fraction:g}{comp}")

    def metadata(self) -> dict:
        return {**{f"db_{k}": v for k, v in asdict(self).items()}, "db_buffer_pool_bytes": self.buffer_pool_bytes,
                "db_buffer_pool_clamped": self.buffer_pool_bytes == self._min_pool,
                "db_estimated_data_bytes": self.data_bytes}

    def env(self, mount: str) -> dict[str, str]:
        return {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DB_MOUNT": mount, "DB_FS": self.filesystem,
                "DB_PAGE_SIZE": self.page_size, "DB_BUFFER_POOL": str(self.buffer_pool_bytes),
                "DB_LOG_FILE_SIZE": str(16 << 20), "DB_KEY_BLOCK_SIZE": str(self.key_block_size),
                # data, redo log, system tablespace and headroom for the run's growth
                "DB_NEED_BYTES": str(self.data_bytes * 2 + (40 << 20)),
                "SB_TEST": self.test, "SB_THREADS": str(self.threads), "SB_TABLES": str(self.tables),
                "SB_TABLE_SIZE": str(self.table_size), "SB_TIME": str(self.runtime_s)}


@dataclass(frozen=True)
class DbRun:
    raw: str            # sysbench run output, unchanged
    server_config: str
    server_log: str
    progress: str


def _split(stderr: str) -> tuple[str, str, str]:
    """(progress, server config, server log) from the runner's stderr."""
    progress, _, rest = stderr.partition("=== server config ===\n")
    config, _, log = rest.partition("=== server log ===\n")
    return progress, config, log


def _result(exitcode: int, stdout: str, stderr: str, where: str) -> DbRun:
    progress, config, log = _split(stderr)
    if exitcode != 0:
        reason = [l for l in progress.splitlines() if l.startswith("run-mysql:") or l.startswith("no disk")]
        raise SysbenchError(f"{where}: {(reason[-1] if reason else progress.strip()[-300:]) or f'exit {exitcode}'}",
                            server_log=log, server_config=config)
    return DbRun(raw=stdout, server_config=config, server_log=log, progress=progress)


def timeout_s(point: DbPoint) -> float:
    # install-db, server start and prepare take a minute or more in a TCG guest
    return point.runtime_s + 240 + point.data_bytes / (1 << 20)


def run_in_guest(agent: GuestAgent, point: DbPoint, *, locator: str) -> DbRun:
    res = agent.exec("/bin/sh", ["-c", guest_script(RUNNER), "run-mysql", locator],
                     env=point.env("/mnt/vtb-db"), timeout=timeout_s(point))
    return _result(res.exitcode, res.stdout.decode(errors="replace"), res.stderr.decode(errors="replace"), agent.vm)


def in_guests(uri: str, point: DbPoint, vms: list) -> list[Output]:
    """The point in each VM at once, on its data disk: one output per VM."""
    with guests(uri, [vm.name for vm in vms]) as agents:
        runs = in_parallel(lambda pair: run_in_guest(pair[0], point, locator=pair[1].locator), list(zip(agents, vms)))
    return outputs(runs, [vm.name for vm in vms])


# $1 device, $2 offset, $3 size, $4 the runner: the runner on a loop device over the slice. The
# loop goes when the runner ends, also when the node stops it (TERM: the runner's traps stop the
# server and unmount; this shell waits for them, then detaches the loop).
LOOP_SLICE = """modprobe -q loop 2>/dev/null  # a host without udev (the nested one) loads it on first use only
loop=$(losetup --find --show --offset "$2" --sizelimit "$3" --direct-io=on "$1") || exit 97
trap 'echo "run-mysql: stopping" >&2' TERM INT
sh -c "$4" run-mysql "path:$loop"; rc=$?
losetup -d "$loop"; exit $rc"""


def run_on_host(host: Node, point: DbPoint, *, device: str, offset: int, size: int, mount: str) -> DbRun:
    """The runner on a host node, on a loop device over one slice of its device."""
    argv = ["/bin/sh", "-c", LOOP_SLICE, "loop-slice", device, str(offset), str(size), guest_script(RUNNER)]
    try:
        out = host.run(argv, env={"PATH": PATH, **point.env(mount)}, timeout=timeout_s(point), check=False)
    except subprocess.TimeoutExpired:
        raise SysbenchError(f"{host.label}: the MariaDB point did not finish within {timeout_s(point):.0f} s; "
                            "stopped it") from None
    stderr = out.stderr.decode(errors="replace")
    if out.returncode == 97:
        raise SysbenchError(f"{host.label}: no loop device over {device}: {stderr.strip()[-300:]}")
    return _result(out.returncode, out.stdout.decode(errors="replace"), stderr, host.label)


def on_host(host: Node, point: DbPoint, slots: list[dict]) -> list[Output]:
    """The point on every host slot at once (kwargs of `run_on_host` each): one output per slot.
    When one fails, the others are stopped (servers down, loops gone) before the failure is raised."""
    runs = in_parallel(lambda slot: run_on_host(host, point, **slot), slots)
    return outputs(runs, [f"host-slot{i}" for i in range(len(slots))])


@dataclass(frozen=True)
class SysbenchResult:
    tps: float
    qps: float
    lat_avg_ms: float
    lat_p95_ms: float
    errors_per_s: float
    version: str = "unknown"
    cpu_s: float = 0.0     # CPU the runner says sysbench, the server and their set-up used

    def metrics(self) -> dict[str, tuple[float, str]]:
        return {"tps": (self.tps, "tx/s"), "qps": (self.qps, "q/s"), "lat_avg": (self.lat_avg_ms, "ms"),
                "lat_p95": (self.lat_p95_ms, "ms"), "errors": (self.errors_per_s, "1/s")}


def parse(raw: str) -> SysbenchResult:
    """sysbench 1.0.x `run` output -> figures."""
    def grab(pattern: str) -> float:
        m = re.search(pattern, raw)
        if not m:
            raise ValueError(f"sysbench output lacks {pattern!r}")
        return float(m.group(1))
    return SysbenchResult(tps=grab(r"transactions:\s+\d+\s+\(([\d.]+) per sec\.\)"),
                          qps=grab(r"queries:\s+\d+\s+\(([\d.]+) per sec\.\)"),
                          lat_avg_ms=grab(r"avg:\s+([\d.]+)"),
                          lat_p95_ms=grab(r"95th percentile:\s+([\d.]+)"),
                          errors_per_s=grab(r"ignored errors:\s+\d+\s+\(([\d.]+) per sec\.\)"),
                          version=(re.search(r"^(sysbench [\w.\-]+)", raw, re.M) or [None, "unknown"])[1],
                          cpu_s=runner_cpu_s(raw))


def aggregate(results: list[SysbenchResult]) -> dict[str, tuple[float, str]]:
    """Totals and means over the concurrent servers of one point."""
    n = len(results)
    return {"aggregate_tps": (sum(r.tps for r in results), "tx/s"),
            "aggregate_qps": (sum(r.qps for r in results), "q/s"),
            "tps_per_vm": (sum(r.tps for r in results) / n, "tx/s"),
            "lat_avg": (sum(r.lat_avg_ms for r in results) / n, "ms"),
            "lat_p95": (sum(r.lat_p95_ms for r in results) / n, "ms")}


def outputs(runs: list[DbRun], names: list[str]) -> list[Output]:
    """Each run's sysbench output, with its server's config and log kept beside it."""
    return [Output(who, run.raw, {"server.cnf": run.server_config, "server.log": run.server_log})
            for who, run in zip(names, runs)]


def failure_files(e: Exception) -> list[Output]:
    """The server's config and log from a failed point, kept for the post-mortem."""
    log = getattr(e, "server_log", "")
    return [Output("failed", "", {"server.cnf": getattr(e, "server_config", ""), "server.log": log})] if log else []
