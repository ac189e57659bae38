"""This machine as the testbed host.

Host-side work (host fio, storage daemons, loop devices) runs here directly today; a nested or
remote host will implement `run` over its own channel, and that is the seam to route it through.
"""
from __future__ import annotations

import subprocess
from dataclasses import dataclass

from harness import paths


@dataclass(frozen=True)
class LocalHost:
    uri: str = paths.LIBVIRT_URI
    name: str = "local"

    def run(self, argv: list[str], *, env: dict | None = None, input: bytes | None = None,
            timeout: float | None = None, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(argv, env=env, input=input, capture_output=True, timeout=timeout, check=check)
