"""This machine as the testbed host."""
from __future__ import annotations

import subprocess
from dataclasses import dataclass

from harness import paths


@dataclass(frozen=True)
class LocalHost:
    uri: str = paths.LIBVIRT_URI
    name: str = "local"
    label: str = "this machine"
    drives: tuple[str, ...] = ()
    l0_accel: str = "n/a"

    def run(self, argv: list[str], *, env: dict | None = None, input: bytes | None = None,
            timeout: float | None = None, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(argv, env=env, input=input, capture_output=True, timeout=timeout, check=check)

    def descriptor(self) -> dict:
        return {"kind": "local", "uri": self.uri}

    def diagnostics(self) -> dict[str, str]:
        return {}  # this machine's logs stay where they are

    def stopped(self) -> str | None:
        return None  # this machine is running this code
