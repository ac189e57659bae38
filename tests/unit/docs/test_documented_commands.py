"""Every `harness ...` command line in the README and docs/ parses, with its options: a command or
an option that does not exist cannot be documented (again)."""
import re
import shlex
from pathlib import Path

import click
import pytest

from harness.cli import cli

REPO = Path(__file__).parents[3]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "results" / "README.md"]


def documented() -> list[tuple[str, str]]:
    """(where, command line) for each harness command in a code block or an inline code span."""
    found = []
    for page in PAGES:
        in_block, lines = False, page.read_text().splitlines()
        for n, line in enumerate(lines, 1):
            if line.strip().startswith("```"):
                in_block = not in_block
                continue
            block = in_block or line.startswith("    ")
            if block and lines[n - 2].rstrip().endswith("\\") and n > 1:
                continue   # a continuation, read with the line it continues
            while block and line.rstrip().endswith("\\") and n < len(lines):
                line, n = line.rstrip()[:-1] + " " + lines[n].strip(), n + 1
            code = [line.strip()] if block else re.findall(r"`([^`]+)`", line)
            for span in code:
                span = re.sub(r'"\$\([^)]*\)"', "RUN", span)   # "$(ls -d ... | tail -1)": a run
                for part in re.split(r"&&|\|\||;|\|", span):
                    part = part.strip().removeprefix("$ ").removeprefix(".venv/bin/")
                    if part.startswith("harness ") and not part.startswith("harness/"):
                        found.append((f"{page.relative_to(REPO)}:{n}", part))
    return found


def parse(line: str) -> None:
    """As click would parse it, stopping before the command runs; placeholders (NAME, FILE, ...)
    and elisions stand for values."""
    line = re.sub(r"\s\[(-|\.\.\.)[^\]]*\]", "", line.split(" # ")[0].split(" > ")[0])   # [--optional P], > file
    words = [w for w in shlex.split(line)[1:] if w not in ("...", "[...]")]
    command, ctx_parent = cli, None
    while isinstance(command, click.Group) and words and not words[0].startswith("-"):
        name, words = words[0], words[1:]
        if re.fullmatch(r"[A-Z_]+", name):   # `harness run NAME`: any of them
            return
        ctx_parent = click.Context(command, info_name=command.name, parent=ctx_parent)
        sub = command.get_command(ctx_parent, name)
        assert sub is not None, f"no command {name!r} in `{line}`"
        command = sub
    if not words:
        return   # a command named in prose (`harness compare`): it exists
    # placeholders: --runtime N, PLAN.json (a file the command would read: any that exists)
    words = ["1" if re.fullmatch(r"N|[A-Z]|\$\w+", w) else str(REPO / "README.md") if re.fullmatch(r"[A-Z_]+\.\w+", w)
             else w for w in words]
    try:
        command.make_context(command.name, words, parent=ctx_parent, resilient_parsing=False)
    except click.exceptions.Exit:
        pass   # --help


@pytest.mark.parametrize("where,line", documented(), ids=lambda x: x if ":" in str(x) else None)
def test_a_documented_command_parses(where, line):
    try:
        parse(line)
    except click.UsageError as e:
        pytest.fail(f"{where}: `{line}`: {e.format_message()}")


def test_the_docs_have_commands_to_check():
    assert len(documented()) > 50


def test_every_relative_link_in_the_docs_leads_to_a_file():
    broken = []
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if not re.match(r"[a-z]+:", target) and not (page.parent / target).exists():
                broken.append(f"{page.relative_to(REPO)}: {target}")
    assert broken == []


def test_the_readme_stays_short():
    assert len((REPO / "README.md").read_text().splitlines()) <= 200
