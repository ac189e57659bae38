"""What a workload's run hands the pipeline: each participant's raw output, as the tool wrote it."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Output:
    """One process's raw output (a VM's or a host slot's), with any files kept beside it."""
    who: str
    raw: str
    extra: dict[str, str | bytes] = field(default_factory=dict)   # file suffix -> text (server config, log, a capture)
    clock_offset_s: float = 0.0   # its node's clock minus this machine's (puts tool timestamps on one line)
    host: str = ""                # the host it ran on (or whose guest it ran in), when the fleet spans hosts
