"""fio: the job template in guest-agents/, run in guests via the agent and on the host directly."""
from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass

from harness import paths
from harness.agent import GuestAgent
from harness.config import FioJobConfig
from harness.workloads import guest_script

JOB_TEMPLATE = paths.GUEST_AGENTS / "fio" / "job.fio"
GUEST_RUNNER = paths.GUEST_AGENTS / "run-fio.sh"


class FioError(RuntimeError):
    pass


@dataclass(frozen=True)
class FioResult:
    """fio's figures for one process (all its jobs, read and write together)."""
    iops: float
    bw_kib_s: float
    lat_mean_us: float
    lat_p50_us: float
    lat_p99_us: float
    lat_p999_us: float
    runtime_s: float
    version: str

    def metrics(self) -> dict[str, tuple[float, str]]:
        return {"iops": (self.iops, "IOPS"), "bw": (self.bw_kib_s, "KiB/s"),
                "lat_mean": (self.lat_mean_us, "us"), "lat_p50": (self.lat_p50_us, "us"),
                "lat_p99": (self.lat_p99_us, "us"), "lat_p999": (self.lat_p999_us, "us")}


def job_env(job: FioJobConfig, *, offset: int, size: int) -> dict[str, str]:
    return {"FIO_OFFSET": str(offset), "FIO_SIZE": str(size), "FIO_RW": job.rw, "FIO_BS": job.bs,
            "FIO_IODEPTH": str(job.iodepth), "FIO_NUMJOBS": str(job.numjobs), "FIO_IOENGINE": job.ioengine,
            "FIO_DIRECT": str(int(job.direct)), "FIO_RUNTIME": str(job.runtime_s), "FIO_RAMP": str(job.ramp_s),
            "FIO_RATE_IOPS": str(job.rate_iops)}


def timeout_s(job: FioJobConfig) -> float:
    return job.runtime_s + job.ramp_s + 60


def fs_env(mkfs: list[str] | None, mount_options: str = "") -> dict[str, str]:
    """Makes run-fio.sh put a new filesystem on the disk and run the job on a file in it."""
    return {"FIO_MKFS": " ".join(mkfs), "FIO_MOUNT_OPTIONS": mount_options} if mkfs else {}


def run_in_guest(agent: GuestAgent, job: FioJobConfig, *, locator: str, size: int, extra_env: dict | None = None) -> str:
    """Runs the job on the guest disk the locator names (see run-fio.sh); returns fio's raw JSON."""
    res = agent.exec("/bin/sh", ["-c", guest_script(GUEST_RUNNER), "run-fio", locator],
                     env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", **job_env(job, offset=0, size=size),
                          **(extra_env or {})},
                     stdin=JOB_TEMPLATE.read_bytes(), timeout=timeout_s(job))
    if res.exitcode != 0:
        raise FioError(f"{agent.vm}: {res.stderr.decode(errors='replace').strip()[-500:] or f'exit {res.exitcode}'}")
    return res.stdout.decode()


def start_on_host(job: FioJobConfig, *, filename: str, offset: int, size: int) -> subprocess.Popen:
    """Starts host fio on a region of the device; finish with `wait_on_host`."""
    env = {**os.environ, **job_env(job, offset=offset, size=size), "FIO_FILENAME": filename}
    with open(JOB_TEMPLATE, "rb") as job_file:  # the job reaches fio on stdin, as in the guest
        return subprocess.Popen(["fio", "--output-format=json", "-"], env=env, stdin=job_file,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_on_host(proc: subprocess.Popen, job: FioJobConfig) -> str:
    try:
        out, err = proc.communicate(timeout=timeout_s(job))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise FioError(f"host fio did not finish within {timeout_s(job):.0f} s; killed it") from None
    if proc.returncode != 0:
        raise FioError(f"host fio exited {proc.returncode}: {err.decode(errors='replace').strip()[-500:]}")
    return out.decode()


def run_on_host(host, job: FioJobConfig, *, device: str, size: int, extra_env: dict | None = None) -> str:
    """Runs the job on a host block device with the guests' runner (any host: this machine or a
    nested one); returns fio's raw JSON."""
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", **job_env(job, offset=0, size=size), **(extra_env or {})}
    try:
        out = host.run(["/bin/sh", "-c", guest_script(GUEST_RUNNER), "run-fio", f"path:{device}"], env=env,
                       input=JOB_TEMPLATE.read_bytes(), timeout=timeout_s(job), check=False)
    except subprocess.TimeoutExpired:
        raise FioError(f"fio on the {host.name} host did not finish within {timeout_s(job):.0f} s; killed it") from None
    if out.returncode != 0:
        raise FioError(f"fio on the {host.name} host exited {out.returncode}: "
                       f"{out.stderr.decode(errors='replace').strip()[-500:]}")
    return out.stdout.decode()


def parse(raw: str) -> FioResult:
    """fio --output-format=json -> FioResult. Tolerates warning lines fio prints before the JSON."""
    start = raw.find("{")
    if start < 0:
        raise FioError("fio printed no JSON")
    try:
        doc = json.loads(raw[start:])
    except json.JSONDecodeError as e:
        raise FioError(f"fio output is not valid JSON: {e}") from None
    iops = bw = ios = lat_sum = 0.0
    runtime_ms = 0
    major = None  # the direction with most I/O supplies the percentiles
    for job in doc["jobs"]:
        if job.get("error"):
            raise FioError(f"fio job {job.get('jobname')} failed with error {job['error']}")
        runtime_ms = max(runtime_ms, job.get("job_runtime", 0))
        for direction in ("read", "write"):
            d = job[direction]
            n = d["total_ios"]
            if not n:
                continue
            iops += d["iops"]
            bw += d["bw"]
            ios += n
            lat_sum += d["lat_ns"]["mean"] * n
            if major is None or n > major["total_ios"]:
                major = d
    if not ios or major is None:
        raise FioError("fio completed no I/O")
    pct = major["clat_ns"]["percentile"]
    return FioResult(iops=iops, bw_kib_s=bw, lat_mean_us=lat_sum / ios / 1000,
                     lat_p50_us=pct["50.000000"] / 1000, lat_p99_us=pct["99.000000"] / 1000,
                     lat_p999_us=pct["99.900000"] / 1000,
                     runtime_s=runtime_ms / 1000, version=doc.get("fio version", "unknown"))
