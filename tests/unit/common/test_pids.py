"""#43: a pid is signalled only while its record's boot id and start time match (harness/common/pids.py)."""
import signal
import subprocess

from harness.common import pids


def test_a_proof_holds_for_its_process_only():
    proc = subprocess.Popen(["sleep", "60"])
    try:
        proof = pids.proof(proc.pid)
        assert proof["start"] == pids.start_ticks(proc.pid) and proof["boot_id"] == pids.boot_id()
        assert pids.proven(proof)
        assert not pids.signal_proven({**proof, "start": proof["start"] + 1}, signal.SIGTERM)
        assert not pids.signal_proven({**proof, "boot_id": "another"}, signal.SIGTERM)
        assert proc.poll() is None
        assert pids.signal_proven(proof, signal.SIGTERM) and proc.wait(timeout=10) == -signal.SIGTERM
        assert not pids.proven(proof) and not pids.signal_proven(proof, signal.SIGTERM)   # reaped: gone
    finally:
        proc.kill()
        proc.wait()


def test_a_zombie_is_not_alive():
    proc = subprocess.Popen(["true"])
    proof = None
    for _ in range(100):   # caught while it still runs, or as the zombie it becomes (not reaped yet)
        proof = pids.proof(proc.pid) or proof
        if pids._stat(proc.pid) and pids._stat(proc.pid)[0] == "Z":
            break
        subprocess.run(["sleep", "0.01"])
    assert proof is not None and not pids.proven(proof)
    proc.wait()
