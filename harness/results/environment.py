"""What a summary says of the environment its samples recorded: the accelerator, and what TCG
figures are (harness/hosts/environment.py collects the environment)."""
from __future__ import annotations

TCG_CAVEAT = "; TCG numbers are not performance numbers"


def tcg_caveat(accel: str) -> str:
    """What follows the accelerator in every summary and plot title: under TCG the guests' CPU is
    emulated, so their figures describe the pipeline, not a backend's speed."""
    return TCG_CAVEAT if "tcg" in accel else ""


def accel_label(env: dict) -> str:
    """The run's accelerator, with the L0's under a nested host (e.g. "kvm in a nested host under
    tcg"): what every summary names. "tcg" anywhere in it means the numbers are not performance numbers."""
    return env["accel"] + (f" in a nested host under {env['l0_accel']}" if env.get("l0_accel", "n/a") != "n/a" else "")
