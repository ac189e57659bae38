"""The `harness` command as the integration tests run it: the venv's launcher, output printed
(pytest shows it for a failed test), the exit code checked unless asked not to."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HARNESS = str(Path(sys.executable).parent / "harness")


def harness(*args, check: bool = True, timeout: float = 900) -> subprocess.CompletedProcess:
    return _ran([HARNESS, *args], check, timeout)


def hook(package: str, *args, check: bool = True, timeout: float = 900) -> subprocess.CompletedProcess:
    """A Terraform hook's entry point, as the fleet's hooks run it: `python -m harness.PACKAGE ...`."""
    return _ran([sys.executable, "-m", f"harness.{package}", *args], check, timeout)


def _ran(argv: list[str], check: bool, timeout: float) -> subprocess.CompletedProcess:
    out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    print(out.stdout, out.stderr)
    if check:
        assert out.returncode == 0, out.stdout + out.stderr
    return out
