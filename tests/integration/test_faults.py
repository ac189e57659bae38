"""Real faults, each with its bound: the run names what it waited for and goes on, nothing hangs."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
HARNESS = str(Path(sys.executable).parent / "harness")
DEAD_HOST_BOUND_S = 30


@pytest.fixture
def silent_ssh_port():
    """A port on 127.0.0.1 that accepts connections and never says anything: an sshd whose host
    hangs, as a client sees it (no packet leaves this machine)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held, stop = [], threading.Event()

    def accept() -> None:
        server.settimeout(0.5)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue
    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[1]
    stop.set()
    for conn in held:
        conn.close()
    server.close()


@pytest.mark.core
@pytest.mark.alone   # `harness gc` on this machine
def test_a_host_that_does_not_answer_fails_every_command_within_the_bound(tmp_path, silent_ssh_port):
    config = tmp_path / "dead-host.toml"
    config.write_text(f'state_dir = "{tmp_path}/state"\nresults_dir = "{tmp_path}/results"\n\n'
                      f'[fleet]\nname = "dead"\n\n[[hosts]]\nname = "gone"\nssh = "root@127.0.0.1"\n'
                      f'port = {silent_ssh_port}\ndevices = ["/dev/vdb"]\n')
    commands = {"testbed up": ["testbed", "up"], "testbed down": ["testbed", "down"], "gc": ["gc"],
                "run": ["run", "latency"]}
    t0 = time.monotonic()
    procs = {what: subprocess.Popen([HARNESS, *argv, "--config", str(config)], stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True) for what, argv in commands.items()}
    for what, proc in procs.items():
        out, _ = proc.communicate(timeout=120)
        took = time.monotonic() - t0
        print(f"{what}: exit {proc.returncode} after {took:.1f} s\n{out}")
        assert proc.returncode != 0, what
        assert took < DEAD_HOST_BOUND_S, f"{what} took {took:.0f} s"
        assert "[[hosts]] gone at 127.0.0.1" in out and f"port {silent_ssh_port}" in out and "Fix:" in out, what
        assert "Traceback" not in out, what
    assert not (tmp_path / "state" / "dead").exists()   # nothing was made for the fleet


LIBVIRTD_BOUND_S = 45   # a connection's bound (30 s) and the command's own start


@pytest.mark.core
@pytest.mark.alone   # stops this machine's libvirtd
def test_a_stopped_libvirtd_is_a_clear_error_within_the_bound(tmp_path):
    """libvirtd stopped with SIGSTOP: it accepts connections and answers nothing."""
    config = tmp_path / "stopped-libvirtd.toml"
    config.write_text(f'state_dir = "{tmp_path}/state"\nresults_dir = "{tmp_path}/results"\n\n'
                      '[fleet]\nname = "nolibvirt"\nvms = 1\ndisk_size_mib = 16\n')
    pid = int(subprocess.run(["pidof", "libvirtd"], capture_output=True, text=True, check=True).stdout.split()[0])
    t0 = time.monotonic()
    os.kill(pid, signal.SIGSTOP)
    try:
        out = subprocess.run([HARNESS, "testbed", "up", "--config", str(config)], capture_output=True, text=True,
                             timeout=300)
        took = time.monotonic() - t0
    finally:
        os.kill(pid, signal.SIGCONT)
    print(out.stdout, out.stderr, f"took {took:.1f} s")
    subprocess.run([HARNESS, "testbed", "down", "--config", str(config)], capture_output=True, timeout=300)
    assert out.returncode != 0 and took < LIBVIRTD_BOUND_S
    said = out.stdout + out.stderr
    assert "a connection to libvirtd at qemu:///system did not return within 30 s" in said
    assert "libvirtd is not answering" in said and "Traceback" not in said
