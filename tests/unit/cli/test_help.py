"""Every command's entry in its group's help fits an 80-column terminal whole (78 columns: click keeps 2 free): no "..." cut."""
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
        out = CliRunner().invoke(cli.cli, [*path, "--help"], terminal_width=78)   # click keeps 2 of 80 free
        assert out.exit_code == 0, out.output
        listed = out.output.split("Commands:")[1].split("Exit status:")[0] if "Commands:" in out.output else ""
        assert "..." not in listed, f"harness {' '.join(path)} --help:\n{listed}"


def _commands(group: click.Group, path: list[str]):
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        sub = group.get_command(ctx, name)
        yield from _commands(sub, [*path, name]) if isinstance(sub, click.Group) else [([*path, name], sub)]


def test_every_option_that_takes_a_value_says_its_default():
    unsaid = [f"harness {' '.join(path)} {p.opts[0]}" for path, command in _commands(cli.cli, []) for p in command.params
              if isinstance(p, click.Option) and not (p.is_flag or p.required or p.show_default)
              and p.name not in ("config_path", "overrides") and "default" not in (p.help or "")]
    assert not unsaid, unsaid
