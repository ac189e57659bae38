"""A host's environment comes from one command on it: each probe's status and first line."""
import subprocess

from harness.hosts import environment


def test_each_probe_is_its_first_line_or_unknown_where_it_failed_or_printed_nothing():
    out = "0\t6.1.0-18-amd64\n1\tcat: /proc/cmdline: denied\n0\tQEMU emulator version 7.2.0\n0\t\n"
    assert environment.probed(out) == {
        "host_kernel": "6.1.0-18-amd64", "host_cmdline": "unknown", "qemu_version": "QEMU emulator version 7.2.0",
        "host_fio_version": "unknown", "cpu_model": "unknown", "host_cpus": "unknown"}   # the last two: missing
    assert set(environment.probed("").values()) == {"unknown"}


def test_the_script_reports_every_probe_as_sh_runs_it(tmp_path):
    """Run by sh without fio and QEMU on the PATH: those are unknown, the rest as each command says."""
    for tool in ("uname", "cat", "sed", "head", "nproc", "printf"):
        (tmp_path / tool).symlink_to(subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True,
                                                    text=True).stdout.strip() or f"/usr/bin/{tool}")
    done = subprocess.run(["/bin/sh", "-c", environment._PROBE_SCRIPT], capture_output=True, text=True,
                          env={"PATH": str(tmp_path)}, timeout=10)
    got = environment.probed(done.stdout)
    assert got["host_kernel"] == subprocess.run(["uname", "-r"], capture_output=True, text=True).stdout.strip()
    assert got["host_cpus"] == subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
    assert got["qemu_version"] == got["host_fio_version"] == "unknown"
    assert len(done.stdout.splitlines()) == len(environment.PROBES)
