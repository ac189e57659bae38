"""`python -m harness.backends host-up|host-down PLAN`: the fleet's Terraform hooks that set up a
backend's host side before the domains, and tear it down after them (idempotent). Tearing down
from a plan file that is gone does nothing: nothing was set up from it, or it is already gone."""
import sys
from pathlib import Path

from harness import backends
from harness.hosts import from_descriptor
from harness.resources import entry


def _host_side(path: Path, up: bool) -> None:
    if not up and not path.exists():
        return
    plan = entry.plan_in(path, backends.read_plan)
    backend = backends.get(plan.disk["backend"])
    (backend.host_up if up else backend.host_down)(from_descriptor(plan.host), plan)


if __name__ == "__main__":
    entry.main({"host-up": lambda p: _host_side(p, True), "host-down": lambda p: _host_side(p, False)},
               sys.argv[1:], "python -m harness.backends")
