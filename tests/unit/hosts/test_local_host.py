"""Commands on this machine stop cleanly: on timeout and on cancel, the whole process group gets
SIGTERM first, so runners' traps clean up (real processes, no mocks)."""
import subprocess
import threading
import time

import pytest

from harness.common.cancel import CANCEL, Cancelled
from harness.hosts import LocalHost

# A runner with a cleanup trap and a child of its own, as run-mysql.sh has (server, mount).
RUNNER = "trap 'echo cleaned > \"$1\"; exit 143' TERM; sleep 60 & wait"


def test_a_timeout_sends_term_to_the_group_so_traps_run(tmp_path):
    marker = tmp_path / "marker"
    t0 = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        LocalHost().run(["sh", "-c", RUNNER, "runner", str(marker)], timeout=0.5)
    assert marker.read_text() == "cleaned\n" and time.monotonic() - t0 < 10
    assert subprocess.run(["pgrep", "-f", f"{marker}"], capture_output=True).returncode == 1  # nothing left


def test_cancel_from_another_thread_stops_the_command(tmp_path):
    marker = tmp_path / "marker"
    threading.Timer(0.5, CANCEL.set).start()
    try:
        with pytest.raises(Cancelled):
            LocalHost().run(["sh", "-c", RUNNER, "runner", str(marker)], timeout=30)
    finally:
        CANCEL.clear()
    assert marker.read_text() == "cleaned\n"


def test_input_output_and_exit_status_as_subprocess_run():
    out = LocalHost().run(["sh", "-c", "cat; echo err >&2; exit 3"], input=b"in", check=False)
    assert (out.returncode, out.stdout, out.stderr) == (3, b"in", b"err\n")
    with pytest.raises(subprocess.CalledProcessError):
        LocalHost().run(["false"])

