"""The runners' own CPU report (guest-agents/runner-cpu.sh), run for real in dash, and its parsing:
a host counts its tool's CPU as the point's own work."""
import subprocess

from harness.common import paths
from harness.workloads import runner_cpu_s


def test_report_cpu_counts_waited_children_and_a_server_given_in_seconds():
    script = (paths.GUEST_AGENTS / "runner-cpu.sh").read_text() + \
        'sh -c \'i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done\'\nreport_cpu 2.25\n'
    out = subprocess.run(["dash", "-c", script], capture_output=True, text=True, check=True).stdout
    got = runner_cpu_s(out)
    # the busy child's CPU (a fixed count, about 0.25 s here, whatever the load) on top of the server's 2.25
    assert 2.25 + 0.05 < got < 2.25 + 3, out


def test_an_output_without_the_report_counts_nothing():
    assert runner_cpu_s("db_bench version 7.8.3\nfillseq : 1.0 micros/op 1 ops/sec;\n") == 0.0
