"""The `harness` command as the integration tests run it: the venv's launcher, output printed
(pytest shows it for a failed test), the exit code checked unless asked not to."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HARNESS = str(Path(sys.executable).parent / "harness")


def harness(*args, check: bool = True, timeout: float = 900) -> subprocess.CompletedProcess:
    out = subprocess.run([HARNESS, *args], capture_output=True, text=True, timeout=timeout)
    print(out.stdout, out.stderr)
    if check:
        assert out.returncode == 0, out.stdout + out.stderr
    return out
