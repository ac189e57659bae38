"""`python -m harness.backends host-up|host-down PLAN`: the fleet's Terraform hooks that set up a
backend's host side before the domains, and tear it down after them (idempotent)."""
import sys

from harness import backends
from harness.hosts import from_descriptor
from harness.resources import entry


def _host_side(plan, up: bool) -> None:
    backend = backends.get(plan.disk["backend"])
    (backend.host_up if up else backend.host_down)(from_descriptor(plan.host), plan)


if __name__ == "__main__":
    entry.main({"host-up": entry.on_plan(backends.read_plan, lambda p: _host_side(p, True)),
                "host-down": entry.on_plan(backends.read_plan, lambda p: _host_side(p, False), undo=True)},
               sys.argv[1:], "python -m harness.backends")
