"""The sandbox of the tools vtb runs on a host (guest-agents/confine.sh), with the job-file gate
bypassed: the runner gets the job text as it is, as if the gate had been fooled. What the job
reaches beyond its target fails, and the host is unchanged. Real fio, bubblewrap and loop devices
(root only)."""
from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from harness.common import paths
from harness.hosts import LocalHost
from harness.libvirt.agent import PATH
from harness.workloads import run_runner
from harness.workloads.fio import GUEST_RUNNER, FioError

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("bwrap"),
                                reason="needs root (loop devices) and bubblewrap")
OUTSIDE = Path("/var/tmp")   # on the host's root filesystem, which the sandbox sees read-only


def loop_of(path: Path, fill: bytes) -> str:
    path.write_bytes(fill * (8 << 20))
    return subprocess.run(["losetup", "--find", "--show", str(path)], capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.fixture
def loops(tmp_path):
    made = [loop_of(tmp_path / "target.img", b"\0"), loop_of(tmp_path / "other.img", b"\x5a")]
    try:
        yield made
    finally:
        for dev in made:
            subprocess.run(["losetup", "-d", dev], check=False)


def run_bare(dev: str, job: str) -> str:
    """The job on this machine's runner, unchecked: what a job that fooled the gate would do."""
    return run_runner(LocalHost(), GUEST_RUNNER, f"path:{dev}", env={"PATH": PATH}, input=job.encode(),
                      timeout=60, tool="fio", error=FioError)


def test_a_job_on_its_target_runs(loops):
    out = run_bare(loops[0], "[t]\nfilename=${FIO_FILENAME}\nrw=write\nbs=64k\nsize=1m\n")
    assert json.loads(out[out.index("{"):])["jobs"][0]["write"]["io_bytes"] == 1 << 20


def test_the_sandbox_has_no_capabilities_no_new_privileges_no_network_and_only_its_target(loops):
    inside = ('grep -E "^(CapEff|NoNewPrivs)" /proc/self/status; tail -n +3 /proc/net/dev | cut -d: -f1; '
              'ls /dev | grep loop; ls /; ls /etc | wc -l; find /tmp -mindepth 1 | wc -l; echo x > /tmp/x && echo tmp')
    script = (paths.GUEST_AGENTS / "confine.sh").read_text() + f'confined "$1" "" sh -c {shlex.quote(inside)}'
    out = subprocess.run(["sh", "-c", script, "confine", loops[0]], env={"PATH": PATH, "VTB_CONFINE": "1"},
                         capture_output=True, text=True, timeout=30, check=True).stdout.split()
    assert out == ["CapEff:", "0000000000000000", "NoNewPrivs:", "1", "lo", Path(loops[0]).name,
                   "bin", "dev", "etc", "lib", "lib64", "proc", "sbin", "sys", "tmp", "usr", "7", "0", "tmp"]


@pytest.mark.parametrize("what, job", [
    ("a file outside", "filename=/var/tmp/confine-test-escape\nrw=write\nsize=64k\n"),
    ("a command", "filename=${FIO_FILENAME}\nrw=read\nsize=64k\n"
                  "exec_prerun=sh -c 'echo ran > /var/tmp/confine-test-escape'\n"),
    ("its verify state through a link", "filename=${FIO_FILENAME}\nrw=write\nsize=64k\nverify=crc32c\n"),
])
def test_what_a_job_writes_beyond_its_target_never_reaches_the_host(loops, monkeypatch, tmp_path, what, job):
    planted = tmp_path / "planted"
    planted.write_text("the host's own file\n")
    monkeypatch.chdir(tmp_path)   # where vtb was started: the runner's own working directory is elsewhere
    (tmp_path / "local-t-0-verify.state").symlink_to(planted)
    escape = OUTSIDE / "confine-test-escape"
    try:
        with pytest.raises(FioError) if what == "a file outside" else contextlib.nullcontext():
            run_bare(loops[0], f"[t]\n{job}")
        assert not escape.exists(), what
        assert planted.read_text() == "the host's own file\n", what
    finally:
        escape.unlink(missing_ok=True)


def test_another_device_is_not_there(loops):
    with pytest.raises(FioError, match="Read-only file system"):   # /dev has no such node, nor room for one
        run_bare(loops[0], f"[t]\nfilename={loops[1]}\nrw=write\nsize=64k\n")
    assert Path(loops[1]).read_bytes()[:4096] == b"\x5a" * 4096


def test_a_library_loads_only_to_find_the_host_read_only(loops, tmp_path):
    """A trace is the user's bytes in the run's scratch folder, which the sandbox sees: loaded as an
    external engine, its constructor runs, as the gate must never let it, and writes only there."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    source = tmp_path / "x.c"
    source.write_text('#include <stdio.h>\n__attribute__((constructor)) static void x(void) {\n'
                      f'  const char *paths[] = {{"{scratch}/ran", "{OUTSIDE}/confine-test-escape",\n'
                      '                         "/etc/confine-test-escape"};\n'
                      '  for (int i = 0; i < 3; i++) { FILE *f = fopen(paths[i], "w"); if (f) fclose(f); }\n}\n')
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(scratch / "trace"), str(source)], check=True)
    try:
        with pytest.raises(FioError):
            run_runner(LocalHost(), GUEST_RUNNER, f"path:{loops[0]}", env={"PATH": PATH, "FIO_TRACE": str(scratch / "trace")},
                       input=b"[t]\nfilename=${FIO_FILENAME}\nioengine=external:${FIO_TRACE}\nsize=64k\n", timeout=60,
                       tool="fio", error=FioError)
        assert (scratch / "ran").exists()
        assert not (OUTSIDE / "confine-test-escape").exists() and not Path("/etc/confine-test-escape").exists()
    finally:
        (OUTSIDE / "confine-test-escape").unlink(missing_ok=True)


def test_a_job_process_that_dies_of_a_signal_fails_the_run(loops, tmp_path):
    """fio 3.33 crashes on a version 2 trace without an `add` record (the gate refuses one), yet
    exits 0 with its job's error 0: the runner reads fio's own word for it."""
    trace = tmp_path / "scratch" / "trace"
    trace.parent.mkdir()
    trace.write_text(f"fio version 2 iolog\n{loops[0]} open\n{loops[0]} read 0 4096\n{loops[0]} close\n")
    with pytest.raises(FioError, match=r"a fio job process died \(fio: pid=\d+, got signal=11\)"):
        run_runner(LocalHost(), GUEST_RUNNER, f"path:{loops[0]}", env={"PATH": PATH, "FIO_TRACE": str(trace)},
                   input=b"[t]\nread_iolog=${FIO_TRACE}\n", timeout=60, tool="fio", error=FioError)


def test_a_job_on_a_new_filesystem_runs_confined_to_its_mount(loops):
    """FIO_MKFS: the runner makes the filesystem and mounts it outside; fio sees the mount's folder."""
    out = run_runner(LocalHost(), GUEST_RUNNER, f"path:{loops[0]}", env={"PATH": PATH, "FIO_MKFS": "mkfs.ext4 -q -F"},
                     input=b"[t]\nfilename=${FIO_FILENAME}\nrw=write\nbs=64k\nsize=1m\n", timeout=60, tool="fio",
                     error=FioError)
    assert json.loads(out[out.index("{"):])["jobs"][0]["write"]["io_bytes"] == 1 << 20
    assert subprocess.run(["blkid", "-p", "-o", "value", "-s", "TYPE", loops[0]], capture_output=True).stdout == b""


def sandbox_cgroups(pid: int | None = None) -> list[str]:
    """The sandboxes' cgroups on this machine (those of the shell `pid`): other tests may run one now."""
    found = subprocess.run(["find", "/sys/fs/cgroup", "-maxdepth", "9", "-type", "d", "-path", "*/vtb-confine/*-*"],
                           capture_output=True, text=True, timeout=30).stdout.split()
    return [d for d in found if pid is None or f"/vtb-confine/{pid}-" in d]


def confined(command: str, **ceilings: str) -> tuple[subprocess.CompletedProcess, int]:
    """The command in a sandbox, and the pid of the shell that made it."""
    script = (paths.GUEST_AGENTS / "confine.sh").read_text() + f'confined /dev/null "" sh -c {shlex.quote(command)}'
    with subprocess.Popen(["sh", "-c", script], env={"PATH": PATH, "VTB_CONFINE": "1", **ceilings},
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), proc.pid


def test_the_sandbox_holds_its_tasks_and_memory_under_its_ceilings_then_its_cgroups_go():
    """Where the host's cgroups can be written (v1 here; v2 in the nested host): more tasks than
    its ceiling cannot start, and a process past its memory is killed, not the host's."""
    tasks, pid = confined("for i in $(seq 16); do sleep 1 & done; wait", VTB_CONFINE_TASKS="8")
    assert "fork" in tasks.stderr.lower() and not sandbox_cgroups(pid), tasks.stderr
    memory, pid = confined("python3 -c 'x = b\"x\" * (256 << 20)'; echo rc=$?", VTB_CONFINE_MEMORY_MIB="64")
    assert "rc=137" in memory.stdout, memory.stdout + memory.stderr   # SIGKILL, by the cgroup's OOM killer
    assert not sandbox_cgroups(pid)


def test_the_cgroups_of_a_killed_sandbox_are_removed_by_gc():
    from harness.fleet import gc
    shell = subprocess.Popen(["sh", "-c", (paths.GUEST_AGENTS / "confine.sh").read_text() + 'confined /dev/null "" sleep 60'],
                             env={"PATH": PATH, "VTB_CONFINE": "1"}, start_new_session=True)
    try:
        for _ in range(50):
            if made := sandbox_cgroups(shell.pid):
                break
            time.sleep(0.1)
        assert made
    finally:
        os.killpg(shell.pid, signal.SIGKILL)   # the shell, and the sandbox dies with it
        shell.wait()
    time.sleep(0.5)
    left = sandbox_cgroups(shell.pid)   # their shell could not remove them (another sandbox here may have)
    assert {f"cgroup {d}" for d in left} <= set(gc.collect("vtb-confine-test-"))
    assert not sandbox_cgroups(shell.pid)


def test_host_slots_wait_for_their_shared_start_inside_fio_in_the_sandbox(loops):
    """Two host slots at once: each job waits for the shared start in its prerun, in the sandbox,
    and neither begins before it nor far after the other."""
    from harness.workloads import fio, fio_output
    job = fio.FioJob(rw="randread", bs="4k", iodepth=1, runtime_s=1, ramp_s=0)
    before = time.time()
    outs = fio.on_host(LocalHost(), job, device=loops[0], slots=[(0, 4 << 20), (4 << 20, 4 << 20)])
    reports = [fio_output.read(o.raw) for o in outs]
    assert all(r.jobs[0].runtime_s >= 1 for r in reports)   # a prerun that failed in the sandbox: no I/O at all
    starts = [r.window[0] for r in reports]
    assert min(starts) >= before + LocalHost.start_lead_s - 0.5   # fio's windows: to its report's second
    assert abs(starts[0] - starts[1]) < 0.5
    assert all("exec_prerun" in json.loads(o.raw[o.raw.index("{"):])["jobs"][0]["job options"] for o in outs)
    assert not any("prerun" in o.raw[:o.raw.index("{")] for o in outs)   # fio's own line of it is not kept


def test_the_tools_cpu_time_reaches_the_runner_and_the_harness(loops):
    """A host point counts its tool's CPU as its own work (report_cpu's `times`, the harness's
    waited-for children), not as other work on the host: the sandbox must pass it on."""
    burn = "i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done"
    script = ((paths.GUEST_AGENTS / "confine.sh").read_text() + (paths.GUEST_AGENTS / "runner-cpu.sh").read_text() +
              f'confined "$1" "" sh -c {shlex.quote(burn)} && report_cpu')
    before = os.times()
    out = LocalHost().run(["sh", "-c", script, "confine", loops[0]], env={"PATH": PATH, "VTB_CONFINE": "1"},
                          timeout=60).stdout.decode()
    after = os.times()
    reported = float(out.split("vtb-runner-cpu-s: ")[1])
    waited = after.children_user + after.children_system - before.children_user - before.children_system
    assert reported > 0.1 and waited >= reported * 0.9, (reported, waited)
