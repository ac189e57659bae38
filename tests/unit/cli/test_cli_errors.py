"""Bad input is a clear error naming the field, never a traceback; and the runs listing tells a
killed run from a running one."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from harness.common.pids import owner
from harness.results.store import RunIndex, status_of

HARNESS = str(Path(sys.executable).parent / "harness")


def harness(*args, env=None):
    return subprocess.run([HARNESS, *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})})


def test_brackets_in_a_set_value_give_the_config_error_not_a_markup_traceback(tmp_path):
    # the list is read as two devices (typed by the field), so the error is about RAID 5's count
    out = harness("testbed", "up", "--set", "raid.members=[/dev/loop0,/dev/loop1]", "--set", "raid.level=5",
                  "--set", f"state_dir={tmp_path}")
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr and "MarkupError" not in out.stderr
    assert "raid.members" in out.stderr and "needs at least 3 member devices, got 2" in out.stderr
    # text with brackets, shown as typed
    out = harness("testbed", "up", "--set", "fleet.name=[bold]x[/bold]", "--set", f"state_dir={tmp_path}")
    assert out.returncode == 2 and "Traceback" not in out.stderr and "MarkupError" not in out.stderr
    assert "fleet.name" in out.stderr and "[bold]x[/bold]" in out.stderr


def test_every_raid_levels_setup_invalid_is_rejected_at_config_time(tmp_path):
    out = harness("run", "raid-levels", "--set", "raid_levels.levels=[5]", "--set", "raid_levels.member_counts=[2]",
                  "--set", "host.kind=nested", "--set", f"state_dir={tmp_path}")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "raid_levels" in out.stderr and "RAID 5 needs at least 3" in out.stderr
    assert "nested host" not in out.stdout.lower()  # nothing booted before the error
    assert not (tmp_path / "nested").exists()


def test_a_sigkilled_run_shows_as_died(tmp_path):
    sleeper = subprocess.Popen(["sleep", "60"])
    manifest = {"run_id": "r1", "experiment": "vm-scaling", "status": "running", "started": time.time(),
                "owner": {**owner(), "pid": sleeper.pid, "start": _start(sleeper.pid)}}
    assert status_of(manifest) == "running"
    run = tmp_path / "r1"
    run.mkdir()
    (run / "run.json").write_text(json.dumps(manifest))
    RunIndex(tmp_path).record(manifest, run)
    sleeper.kill()
    sleeper.wait()
    assert status_of(manifest) == "died"
    listing = harness("runs", "--set", f"results_dir={tmp_path}").stdout
    assert "died" in listing and "running" not in listing
    other_machine = {**manifest, "owner": {**manifest["owner"], "host": socket.gethostname() + "-elsewhere"}}
    assert status_of(other_machine) == "running"  # cannot be told from here: taken at its word


def _start(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])


def test_apt_lock_wait_waits_for_a_held_lock_then_goes_on(tmp_path):
    lock = Path("/var/lib/dpkg/lock-frontend")
    holder = subprocess.Popen([sys.executable, "-c", f"""
import fcntl, os, time
fd = os.open({str(lock)!r}, os.O_RDWR | os.O_CREAT)
fcntl.lockf(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(3)
"""], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    script = Path(__file__).parents[3] / "scripts" / "apt-lock-wait.sh"
    t0 = time.monotonic()
    out = subprocess.run([str(script), "30"], capture_output=True, text=True, timeout=60)
    holder.wait()
    assert out.returncode == 0 and "waiting for another apt/dpkg" in out.stdout
    assert time.monotonic() - t0 >= 2
    holder = subprocess.Popen([sys.executable, "-c", f"""
import fcntl, os, time
fd = os.open({str(lock)!r}, os.O_RDWR | os.O_CREAT)
fcntl.lockf(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(8)
"""], stdout=subprocess.PIPE, text=True)
    holder.stdout.readline()
    out = subprocess.run([str(script), "2"], capture_output=True, text=True, timeout=60)
    holder.kill()
    assert out.returncode == 1 and "still held" in out.stderr


def test_a_config_that_is_a_directory_is_one_error_line_not_a_traceback():
    out = harness("testbed", "up", "--config", "/etc")
    assert out.returncode == 2 and "Traceback" not in out.stderr + out.stdout
    assert out.stdout == "" and out.stderr.strip() == "error: config file /etc cannot be read: Is a directory. Fix: " \
                                                        "pass a readable TOML file to --config"


def test_a_command_that_failed_is_one_line_with_its_words_and_the_fix():
    """#28: a CalledProcessError (a command vtb ran with check=True) is said with the command, its
    exit status and its last line of stderr, not as Python's bare message or a traceback."""
    from harness.resources.entry import failed_command
    e = subprocess.CalledProcessError(32, ["mount", "/dev/vtb-x", "/run/vtb-x"],
                                      stderr=b"mount: /run/vtb-x: special device /dev/vtb-x does not exist.\n")
    line = failed_command(e)
    assert line.startswith("`mount /dev/vtb-x /run/vtb-x` failed with exit status 32: mount: /run/vtb-x: special device")
    assert "Fix: " in line and "\n" not in line
