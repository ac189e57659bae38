"""One module per workload tool: renders its job, runs it in a guest or on a host, parses its raw output."""
from __future__ import annotations

import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from harness.common.guest_scripts import guest_script
from harness.common.plugins import discover


@dataclass(frozen=True)
class Tool:
    """A workload tool as the fio matrix drives it: its job run on (offset, size) slots of a host
    device or in VMs, its output parsed, its job as sample metadata and its own run time for a plan.
    `qd1_job`, where the tool has one, makes the job of a QD1 latency point (`harness run latency`'s
    `tools`) from the experiment's settings (runtime_s, ramp_s, ...), an access pattern and a block size."""
    name: str
    on_host: Callable[..., list]        # (host, job, *, device, slots) -> [Output]
    in_guests: Callable[..., list]      # (uri, job, vms) -> [Output]
    parse: Callable[[str], Any]
    job_meta: Callable[[Any], dict]
    tool_seconds: Callable[[Any], float]
    qd1_job: Callable[..., Any] | None = None   # (settings, rw, bs) -> job
    host_packages: tuple[str, ...] = ()         # Debian packages it needs on a host beyond the main job's


def tools() -> dict[str, Tool]:
    """{name: Tool} of every workload module that defines TOOL."""
    return discover(__name__, __path__, "TOOL")


def qd1_tools() -> list[str]:
    """The tools that can measure a QD1 latency point."""
    return [name for name, t in tools().items() if t.qd1_job]


def runner_cpu_s(raw: str) -> float:
    """The CPU seconds a runner says its tool (and server) used (`report_cpu`), 0 when it says none."""
    m = re.search(r"^vtb-runner-cpu-s: ([\d.]+)$", raw, re.M)
    return float(m.group(1)) if m else 0.0


def run_runner(node, runner: Path, locator: str, *, env: dict, timeout: float, tool: str,
               error: type[Exception], timeout_error: type[Exception] | None = None, input: bytes | None = None) -> str:
    """A runner on a node (a guest or a host, the same call), its stdout; a timeout (the node stops
    the runner) or a failure raises the tool's own error, naming the node."""
    t0 = time.monotonic()
    if getattr(node, "confines_tools", True):   # only a node that says it holds nothing else runs a tool bare
        env = {**env, "VTB_CONFINE": "1"}
    try:
        out = node.run(["/bin/sh", "-c", guest_script(runner), runner.stem, locator], env=env, input=input,
                       timeout=timeout, check=False)
    except subprocess.TimeoutExpired:   # the stop takes its grace too: said, so the point's time is the real one
        raise (timeout_error or error)(f"{tool} on {node.label} did not finish within {timeout:.0f} s; stopped it "
                                       f"({time.monotonic() - t0:.0f} s in all)") from None
    if out.returncode != 0:
        raise error(f"{tool} on {node.label} exited {out.returncode}: {out.stderr.decode(errors='replace').strip()[-500:]}")
    return out.stdout.decode(errors="replace")
