"""The `harness` command's modules: none is named like a command, whose function in the package
would shadow it (`from harness.cli import doctor` then gives the command, not the module)."""
import importlib
import pkgutil

import harness.cli as cli_package
from harness.cli import cli


def test_no_module_of_the_cli_package_is_named_like_a_command():
    modules = {m.name for m in pkgutil.iter_modules(cli_package.__path__)}
    assert modules >= {"doctor_checks", "self_bench"}
    assert not modules & set(cli.commands), modules & set(cli.commands)
    for name in modules:
        assert importlib.import_module(f"harness.cli.{name}").__name__ == f"harness.cli.{name}"


def test_the_doctor_and_bench_commands_reach_their_modules():
    from harness.cli import doctor_checks, self_bench
    assert callable(doctor_checks.report) and callable(doctor_checks.checks) and callable(self_bench.run)
