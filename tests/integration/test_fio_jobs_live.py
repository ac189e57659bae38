"""Your own fio jobs for real: a job file of two stonewalled jobs (a QD1 random read, a 70/30
mix), preconditioned and captured, on the host and in a VM on two backends, each job and
direction a point of its own, then a guest's capture replayed on the host and in a VM; every
shipped profile, a precondition and a capture-and-replay run by the same runner on this host."""
from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.fleet import gc
from harness.hosts import LocalHost
from harness.workloads import fio, fio_jobfile, fio_trace

pytestmark = pytest.mark.integration
CONFIG = Path(__file__).parents[1] / "ci.toml"
HARNESS = str(Path(sys.executable).parent / "harness")
TWO_JOBS = """[global]
ioengine=libaio
direct=1
time_based=1
runtime=30

[qd1-randread]
rw=randread
bs=4k
iodepth=1

[mix-70-30]
stonewall
rw=randrw
rwmixread=70
bs=4k
iodepth=8
"""


@pytest.mark.core
@pytest.mark.covers(experiments="fio-job")
def test_a_job_file_on_the_host_and_two_backends(tmp_path):
    job = tmp_path / "two.fio"
    job.write_text(TWO_JOBS)
    # preconditioned (a fill, then each job until steady: short bounds here), on a small slice
    steady = ["--precondition", "--set", "fio_job.steady_window_s=1", "--set", "fio_job.steady_ramp_s=0",
              "--set", "fio_job.steady_max_s=3", "--set", "fleet.disk_size_mib=32"]
    out = subprocess.run([HARNESS, "run", "fio-job", "--job", str(job), "--backend", "virtio-blk,virtio-scsi",
                          "--runtime", "1", "--ramp", "0", "--set", "repeat.count=1", *steady, "--capture", "--set",
                          f"results_dir={tmp_path / 'runs'}", "--config", str(CONFIG)],
                         capture_output=True, text=True, timeout=900)
    print(out.stdout, out.stderr)
    assert out.returncode == 0, out.stdout + out.stderr
    (run,) = (tmp_path / "runs").glob("*-fio-job-*")   # beside the runs index
    rows = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    assert all(r["status"] == "ok" for r in rows), [r["error"] for r in rows if r["status"] != "ok"]
    iops = {(r["point"], r["direction"], r["backend"]) for r in rows if r["metric"] == "iops"}
    facets = [("qd1-randread/read", "read"), ("mix-70-30/read", "read"), ("mix-70-30/write", "write")]
    assert iops == {(p, d, b) for p, d in facets for b in ("host", "virtio-blk", "virtio-scsi")}
    # one fio run per participant and repeat, reporting the jobs apart: the mix's reads and writes differ
    mix = {r["direction"]: r["value"] for r in rows if r["metric"] == "iops" and r["backend"] == "host"
           and r["point"].startswith("mix")}
    assert mix["read"] != mix["write"] and 1.5 < mix["read"] / mix["write"] < 4   # about 70/30
    ratios = {(r["point"], r["backend"]) for r in rows if r["metric"] == "ve_pe_ratio"}
    assert ratios == {(p, b) for p, _ in facets for b in ("virtio-blk", "virtio-scsi")}
    p99 = [r for r in rows if r["metric"] == "lat_p99"]
    assert all(len(r["percentiles_us"]) == 18 and r["job_file"] == str(job) for r in p99)
    # the steady-state verdict, on every sample of a measured job
    assert all(isinstance(r["steady_state_reached"], bool) and r["steady_state_after_s"] > 0
               and r["steady_state_criterion"].startswith("iops_slope") and r["precondition_fill_mib"] > 0 for r in p99)
    assert (run / "fio-job-percentiles.png").read_bytes()[:4] == b"\x89PNG"
    report = subprocess.run([HARNESS, "report", str(run)], capture_output=True, text=True, timeout=300)
    assert report.returncode == 0, report.stdout + report.stderr
    assert "fio-job-percentiles.png" in (run / "report.html").read_text()
    assert gc.leftovers("vtb-sw-ci-") == []

    # what the guest on virtio-scsi did, replayed on the host and in a VM on virtio-blk
    (iolog,) = [p for p in run.rglob("*.mix-70-30.iolog.gz") if p.parent.name == "virtio-scsi"]
    replay = subprocess.run([HARNESS, "run", "replay", "--trace", str(iolog), "--backend", "virtio-blk", "--set",
                             "repeat.count=1", "--set", "fleet.disk_size_mib=32", "--set",
                             f"results_dir={tmp_path / 'replays'}", "--config", str(CONFIG)],
                            capture_output=True, text=True, timeout=900)
    print(replay.stdout, replay.stderr)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    (run,) = (tmp_path / "replays").glob("*-replay-*")
    rows = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    got = {(r["point"], r["backend"]) for r in rows if r["metric"] == "iops" and r["status"] == "ok"}
    assert got == {(f"replay/{d}", b) for d in ("read", "write") for b in ("host", "virtio-blk")}
    assert {r["trace"] for r in rows if r["metric"] == "iops"} == {str(iolog)}
    assert gc.leftovers("vtb-sw-ci-") == []


@pytest.mark.extended(why="a job file across VMs: make test runs one on the host and two backends")
@pytest.mark.covers(experiments="fio-job")
def test_a_profile_in_two_vms_at_once_against_two_host_slots(tmp_path):
    """fio-job --vm-counts 2: the point's figures are the sum over both VMs (or slots), its
    percentiles those of their merged histograms, its ratio taken on the sums."""
    out = subprocess.run([HARNESS, "run", "fio-job", "--profile", "oltp-70-30", "--vm-counts", "2", "--backend",
                          "virtio-blk", "--runtime", "1", "--ramp", "0", "--set", "repeat.count=1", "--set",
                          "fleet.disk_size_mib=32", "--set", f"results_dir={tmp_path}", "--config", str(CONFIG)],
                         capture_output=True, text=True, timeout=900)
    print(out.stdout, out.stderr)
    assert out.returncode == 0, out.stdout + out.stderr
    (run,) = tmp_path.glob("*-fio-job-*")
    rows = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    assert all(r["status"] == "ok" for r in rows), [r["error"] for r in rows if r["status"] != "ok"]
    agg = {(r["point"], r["backend"]) for r in rows if r["metric"] == "aggregate_iops"}
    assert agg == {(f"n2/oltp-70-30/{d}", b) for d in ("read", "write") for b in ("host", "virtio-blk")}
    assert {r["vm"] for r in rows if r["metric"] == "iops" and r["env"] == "virtual"} == {"vtb-sw-ci-vm0",
                                                                                         "vtb-sw-ci-vm1"}
    p99 = [r for r in rows if r["metric"] == "lat_p99" and r["scope"] == "aggregate"]
    assert len(p99) == 4 and all(r["percentiles_from"] == "the merged histograms of 2" for r in p99)
    assert {r["point"] for r in rows if r["metric"] == "ve_pe_ratio"} == {f"n2/oltp-70-30/{d}" for d in ("read", "write")}
    assert "n2/oltp-70-30/write" in (run / "summary.txt").read_text()
    assert gc.leftovers("vtb-sw-ci-") == []


@pytest.mark.extended(why="every shipped profile; make test runs a user's job file")
@pytest.mark.covers(experiments="fio-job")
@pytest.mark.parametrize("name", sorted(fio_jobfile.profiles()))
def test_every_shipped_profile_runs(tmp_path, name):
    """The runner that runs it in guests runs it here, on two slots of a file, at 1 s a job: fio
    accepts the rendered file and reports every job and direction the profile has."""
    data = tmp_path / "data.bin"
    data.write_bytes(b"\0" * (16 << 20))
    job = fio_jobfile.load(fio_jobfile.profile(name), 8 << 20, f"profile {name}", {"runtime": "1", "ramp_time": "0"})
    outputs = fio.on_host(LocalHost(), job, device=str(data), slots=[(0, 8 << 20), (8 << 20, 8 << 20)])
    for out in outputs:
        report = fio.parse_jobs(out.raw)
        keys = [key for key, _, _ in report.facets()]
        assert keys and all(r.iops > 0 and (r.lat_p99_us or 0) > 0 for _, _, r in report.facets()), keys
        if name in ("oltp-70-30", "vdi-mixed"):
            assert keys == [f"{name}/read", f"{name}/write"]
        if name == "fsync-write":
            assert report.facets()[0][1]["sync_ios"] > 0   # fio's fsync figures beside the writes


@pytest.mark.extended(why="a fill and a steady-state run before the measured jobs")
@pytest.mark.covers(experiments="fio-job")
def test_a_preconditioned_file_runs_the_fill_and_the_steady_runs_first(tmp_path):
    data = tmp_path / "data.bin"
    data.write_bytes(b"\0" * (8 << 20))
    pre = fio_jobfile.Precondition("iops_slope:20%", window_s=1, ramp_s=0, max_s=4)
    job = fio_jobfile.load(fio_jobfile.profile("oltp-70-30"), 8 << 20, "profile oltp-70-30", {"runtime": "1"}, pre)
    (out,) = fio.on_host(LocalHost(), job, device=str(data), slots=[(0, 8 << 20)])
    facets = fio.parse_jobs(out.raw).facets()
    assert [key for key, _, _ in facets] == ["oltp-70-30/read", "oltp-70-30/write"]
    meta = facets[0][1]
    assert meta["precondition_fill_mib"] == 8 and isinstance(meta["steady_state_reached"], bool)
    assert 0 < meta["steady_state_after_s"] <= 4.5


@pytest.mark.core
@pytest.mark.covers(experiments=("replay", "fio-job"))
def test_a_capture_on_one_slot_replays_on_another(tmp_path):
    """Captured on the first 8 MiB of a file, replayed onto the second 8 MiB: the iolog is kept
    relative to its slice, and the replay does the trace's reads and writes, there."""
    data = tmp_path / "data.bin"
    data.write_bytes(b"\0" * (16 << 20))
    job = fio_jobfile.load(fio_jobfile.profile("oltp-70-30"), 8 << 20, "profile oltp-70-30",
                           {"runtime": "1", "ramp_time": "0"}, capture=True)
    (out,) = fio.on_host(LocalHost(), job, device=str(data), slots=[(0, 8 << 20)])
    kept = out.extra["oltp-70-30.iolog.gz"]
    log = gzip.decompress(kept).decode()
    assert log.startswith("fio version") and " write " in log and " read " in log
    assert not list(tmp_path.glob("vtb-iolog-*")) and not [p for p in (Path("/tmp")).glob("vtb-iolog-*")]
    captured = tmp_path / "cap.iolog.gz"
    captured.write_bytes(kept)
    trace = fio_trace.load(captured, 8 << 20, iodepth=4, max_s=30)
    (replayed,) = fio.on_host(LocalHost(), trace, device=str(data), slots=[(8 << 20, 8 << 20)])
    report = fio.parse_jobs(replayed.raw)
    ios = {key: r.iops for key, _, r in report.facets()}
    assert set(ios) == {"replay/read", "replay/write"} and all(v > 0 for v in ios.values())
    assert not [p for p in Path("/tmp").glob("vtb-trace-*")]   # the uploaded trace went with the run
