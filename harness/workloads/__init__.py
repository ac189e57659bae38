"""One module per workload tool: renders its job, runs it in a guest or on a host, parses its raw output."""
from __future__ import annotations

from pathlib import Path

from harness import paths


def guest_script(runner: Path) -> str:
    """A runner from guest-agents/ with the disk finder in front, sent whole as `sh -c SCRIPT NAME
    LOCATOR`: nothing is installed in the guest, and the host runs the same script."""
    return "locator=$1\n" + (paths.GUEST_AGENTS / "find-disk.sh").read_text() + runner.read_text()
