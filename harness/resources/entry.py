"""The entry point of Terraform's hooks: one idempotent action of the layer that owns it, on a plan
file (`python -m harness.resources raid create PLAN`, `python -m harness.backends host-up PLAN`).
A failure is one `error:` line and vtb's exit status (harness/common/exits.py), never a traceback:
Terraform shows it, and the fleet's bring-up names it."""
from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Callable, TypeVar

import libvirt

from harness.common.bounded import Unanswered
from harness.common.console import error, step
from harness.common.exits import Exit, StepFailed
from harness.common.schema import ConfigError
from harness.hosts.ssh import SshError

T = TypeVar("T")
Action = Callable[[Path], "str | None"]   # the plan file -> what it did, to say, or None


def command(package: str, action: str, plan_file: Path) -> str:
    """The hook's command line: this Python running `action` of harness.`package` on `plan_file`."""
    return f"{shlex.quote(sys.executable)} -m harness.{package} {action} {shlex.quote(str(plan_file))}"


def failed_command(e: subprocess.CalledProcessError) -> str:
    """One line for a command that failed: the command, its exit status, its last words, the fix."""
    cmd = e.cmd if isinstance(e.cmd, str) else " ".join(map(str, e.cmd))
    said = e.stderr or e.stdout or b""
    said = (said.decode(errors="replace") if isinstance(said, bytes) else said).strip().splitlines()
    return (f"`{cmd[:200]}` failed with exit status {e.returncode}" + (f": {said[-1][:300]}" if said else "")
            + ". Fix: correct what it names; run it by hand to see all it says (`harness --debug ...` shows "
              "where vtb ran it)")


def failure(e: BaseException) -> tuple[Exit, str] | None:
    """vtb's exit status and one line for an expected failure (bad input, a step on a host that
    failed or passed its bound, libvirtd refusing), or None for anything else, which is a bug."""
    if isinstance(e, ConfigError):
        return Exit.BAD_INPUT, str(e)
    if isinstance(e, subprocess.CalledProcessError):   # a command run with check=True: its own words
        return Exit.HOST_FAILED, failed_command(e)
    if isinstance(e, (StepFailed, Unanswered, SshError, subprocess.SubprocessError)):
        return Exit.HOST_FAILED, str(e)
    if isinstance(e, libvirt.libvirtError):   # a libvirtd that is not running, or that refused a call
        return Exit.HOST_FAILED, (f"libvirt: {e.get_error_message()}. Fix: check that libvirtd runs "
                                  "(`scripts/libvirtd.sh start` starts this machine's; `make testbed up` does too)")
    return None


def main(actions: dict[str, Action], argv: list[str], prog: str) -> None:
    """Runs the action `argv` names on its plan file, and exits with its status. VTB_DEBUG=1 shows
    a bug's traceback."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.umask(os.umask(0o022) | 0o022)   # as `harness`: what vtb makes is root's alone to change
    name = " ".join(argv[:-1])
    if len(argv) < 2 or name not in actions:
        error(f"usage: {prog} {{{'|'.join(actions)}}} PLAN_FILE (Terraform's hooks run it; got {' '.join(argv) or 'nothing'})")
        sys.exit(Exit.BAD_INPUT)
    try:
        if said := actions[name](Path(argv[-1])):
            step(said)
    except KeyboardInterrupt:
        sys.exit(Exit.INTERRUPTED)
    except Exception as e:
        if (known := failure(e)) is None and os.environ.get("VTB_DEBUG") == "1":
            raise
        status, line = known or (Exit.INTERNAL, f"unexpected {type(e).__name__}: {e}. This is a vtb bug: run it "
                                                f"again with VTB_DEBUG=1 for the traceback, and report it")
        error(line)
        sys.exit(status)
    sys.exit(Exit.OK)


def on_plan(parse: Callable[[str], T], act: Callable[[T], "str | None"], undo: bool = False) -> Action:
    """An action on the plan `parse` reads from its file; undoing from a file that is gone does
    nothing (nothing was made from it, or it is already removed)."""
    def action(path: Path) -> str | None:
        return None if undo and not path.exists() else act(plan_in(path, parse))
    return action


def plan_in(path: Path, parse: Callable[[str], T]) -> T:
    """The plan `parse` reads from a plan file, or a ConfigError that names the file."""
    try:
        text = path.read_text()
    except OSError as e:
        raise ConfigError(f"the plan file {path}: {e.strerror}. Fix: give the plan file the fleet wrote") from None
    try:
        return parse(text)
    except ConfigError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError) as e:   # not JSON, or not of this plan's fields
        raise ConfigError(f"the plan file {path} is not a plan of this action ({type(e).__name__}: {e}). Fix: give "
                          "the plan file the fleet wrote") from None
