"""The Terraform hooks' entry points (`python -m harness.resources|harness.backends ...`): one line
and vtb's exit status for every failure, never a traceback; destroy from a plan that is gone is a no-op."""
import subprocess
import sys

import libvirt
import pytest

from harness.common.exits import Exit, StepFailed
from harness.common.schema import ConfigError
from harness.resources.entry import failure


def hook(package: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", f"harness.{package}", *args], capture_output=True, text=True,
                          timeout=120)


def test_an_action_it_does_not_have_is_bad_input_naming_those_it_has(tmp_path):
    out = hook("resources", "raid", "grow", str(tmp_path / "plan.json"))
    assert out.returncode == Exit.BAD_INPUT and "Traceback" not in out.stderr
    assert "raid create|raid destroy|ceph create|ceph destroy" in out.stderr and "got raid grow" in out.stderr
    assert hook("backends").returncode == Exit.BAD_INPUT


@pytest.mark.parametrize("package, up, down", [("resources", ["raid", "create"], ["raid", "destroy"]),
                                               ("resources", ["ceph", "create"], ["ceph", "destroy"]),
                                               ("backends", ["host-up"], ["host-down"])])
def test_a_plan_file_that_is_gone_is_refused_to_make_and_nothing_to_undo(tmp_path, package, up, down):
    gone = str(tmp_path / "plan.json")
    made = hook(package, *up, gone)
    assert made.returncode == Exit.BAD_INPUT and made.stderr.startswith(f"error: the plan file {gone}: No such file")
    assert "Fix:" in made.stderr and "Traceback" not in made.stderr
    undone = hook(package, *down, gone)
    assert undone.returncode == 0 and undone.stderr == ""


@pytest.mark.parametrize("text", ["{not json", '{"name": "vtb-x"}', "[]"])
@pytest.mark.parametrize("package, action", [("resources", ["ceph", "destroy"]), ("resources", ["raid", "destroy"]),
                                             ("backends", ["host-down"])])
def test_a_plan_file_that_is_not_a_plan_is_bad_input_in_one_line(tmp_path, text, package, action):
    (tmp_path / "plan.json").write_text(text)
    out = hook(package, *action, str(tmp_path / "plan.json"))
    assert out.returncode == Exit.BAD_INPUT and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert out.stderr.startswith(f"error: the plan file {tmp_path}/plan.json is not a plan of this action")


def test_each_kind_of_failure_has_its_status():
    assert failure(ConfigError("x")) == (Exit.BAD_INPUT, "x")
    assert failure(StepFailed("y")) == (Exit.HOST_FAILED, "y")
    assert failure(subprocess.TimeoutExpired(["fio"], 5))[0] == Exit.HOST_FAILED
    status, line = failure(subprocess.CalledProcessError(1, ["mdadm", "--create"], stderr=b"mdadm: busy\n"))
    assert status == Exit.HOST_FAILED and line.startswith("`mdadm --create` failed with exit status 1: mdadm: busy")
    assert failure(libvirt.libvirtError("no"))[0] == Exit.HOST_FAILED
    assert failure(KeyError("z")) is None   # a bug: the caller says so, exit 70
