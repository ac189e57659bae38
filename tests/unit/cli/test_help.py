"""Every command's entry in its group's help fits an 80-column terminal whole: no "..." cut."""
import click
from click.testing import CliRunner

from harness import cli


def _groups(group: click.Group, path: list[str]):
    yield path
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        sub = group.get_command(ctx, name)
        if isinstance(sub, click.Group):
            yield from _groups(sub, [*path, name])


def test_no_short_help_is_cut():
    for path in _groups(cli.cli, []):
        out = CliRunner().invoke(cli.cli, [*path, "--help"], terminal_width=80)
        assert out.exit_code == 0, out.output
        listed = out.output.split("Commands:")[1].split("Exit status:")[0] if "Commands:" in out.output else ""
        assert "..." not in listed, f"harness {' '.join(path)} --help:\n{listed}"
