"""vtb's exit statuses: a contract a CI job or a script can rely on. `harness --help` and
docs/measurement.md show this one table."""
from __future__ import annotations

import textwrap
from enum import IntEnum


class Exit(IntEnum):
    OK = 0
    REGRESSION = 1       # `compare`: a significant regression
    BAD_INPUT = 2        # bad input or a refusal (a config field, a flag, a run that does not exist): nothing changed
    POINTS_FAILED = 3    # a run whose points failed or were not measured (`--allow-failed-points` accepts them)
    HOST_FAILED = 4      # the host lacks what is needed, or a step on it failed (libvirtd, Terraform, a guest, a tool)
    LEFTOVERS = 5        # a teardown or gc left something it names
    INTERNAL = 70        # an unexpected error: a vtb bug (`harness --debug ...` shows its traceback)
    INTERRUPTED = 130    # Ctrl-C (the run is kept, recorded as interrupted)
    TERMINATED = 143     # SIGTERM (a CI timeout, `kill`): as Ctrl-C


MEANING = {
    Exit.OK: "success",
    Exit.REGRESSION: "`compare` found a significant regression",
    Exit.BAD_INPUT: "bad input or a refusal (a config field, a flag, a run that does not exist, a device vtb refuses): "
                    "one `error:` line with the fix; nothing was changed",
    Exit.POINTS_FAILED: "a run's points failed or were not measured (each recorded as failed with its error; a block "
                        "whose fleet did not come up, in `blocks_failed`), or `compare`'s run under test lost points "
                        "the baseline measured; `--allow-failed-points` exits 0 instead",
    Exit.HOST_FAILED: "the host lacks what is needed (`doctor`), or a step on it failed (libvirtd, Terraform, a guest, "
                      "a tool): one `error:` line",
    Exit.LEFTOVERS: "a teardown or `gc` left something, which it names",
    Exit.INTERNAL: "an unexpected error, which is a vtb bug: one line; `harness --debug ...` shows its traceback",
    Exit.INTERRUPTED: "Ctrl-C: the run is recorded as `interrupted`, with what it measured",
    Exit.TERMINATED: "SIGTERM (a CI timeout, `kill`): as Ctrl-C",
}


class StepFailed(RuntimeError):
    """A step on a host failed or the host lacks what it needs (a tool, a daemon, a guest): exit 4.
    vtb's errors derive from it; with the errors of ssh, of a bound, of a command and of libvirt,
    which main() names too, they are the exit-4 failures, and any other exception is a bug (70)."""


class BringUpFailed(StepFailed):
    """A fleet, or a resource it stands on (a Ceph cluster), did not come up: a sweep fails that
    block and goes on, where a Ctrl-C or a refusal ends the run."""


def table() -> str:
    """The statuses, one a line (`harness --help`)."""
    return "\n".join(textwrap.fill(MEANING[code], 96, initial_indent=f"{int(code):>3}  ", subsequent_indent=" " * 5)
                     for code in Exit)


def markdown() -> str:
    """The statuses as docs/measurement.md's table."""
    return "| status | meaning |\n|---|---|\n" + "".join(f"| {int(code)} | {MEANING[code]} |\n" for code in Exit)
