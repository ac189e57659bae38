"""A host's dirty pages written back, within a bound."""
from __future__ import annotations

import subprocess

from harness.common import bounded

FLUSH_S = 600   # writing back the dirty pages of a prefill, at the slowest disk vtb expects


def flush(host) -> None:
    """Writes dirty pages back now (after a prefill), so the first point does not pay for it."""
    try:
        with bounded.heartbeat(f"the page cache of {host.label} to be written back (sync)", FLUSH_S):
            host.run(["sync"], timeout=FLUSH_S, check=False)
    except subprocess.TimeoutExpired:
        pass
