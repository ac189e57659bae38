"""The scripts vtb runs in guests and on hosts alike (guest-agents/), as one shell command."""
from __future__ import annotations

from pathlib import Path

from harness.common import paths


def guest_script(runner: Path) -> str:
    """A runner from guest-agents/ with the disk finder in front, sent whole as `sh -c SCRIPT NAME
    LOCATOR`: nothing is installed in the guest, and the host runs the same script (its tool
    confined there: guest-agents/confine.sh)."""
    parts = ("find-disk.sh", "runner-cpu.sh", "confine.sh")
    return "locator=$1\n" + "".join((paths.GUEST_AGENTS / f).read_text() for f in parts) + runner.read_text()
