"""The guest's kill of a point's processes (agent.KILL_TREE), run by /bin/sh here as it runs in a
guest: every process of the tree ends, also those whose parent ended at the TERM."""
import subprocess
import time

from harness.libvirt.agent import KILL_TREE

# a runner that ends at TERM, and under it a job that ignores TERM (as a busy fio job may)
TREE = "sh -c 'trap \"\" TERM; while :; do sleep 0.1; done' & echo $! > {child}; wait"


def alive(pid: int) -> bool:
    return subprocess.run(["kill", "-0", str(pid)], capture_output=True).returncode == 0


def test_a_job_that_outlives_its_runner_is_killed_after_the_grace(tmp_path):
    child_file = tmp_path / "child"
    top = subprocess.Popen(["sh", "-c", TREE.format(child=child_file)])
    deadline = time.monotonic() + 10
    while not child_file.exists() or not child_file.read_text().strip():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    child = int(child_file.read_text())
    killed = subprocess.run(["/bin/sh", "-c", KILL_TREE, "kill-tree", str(top.pid), "2"], timeout=30)
    top.wait(timeout=10)
    deadline = time.monotonic() + 5
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert killed.returncode in (0, 1) and not alive(child)
