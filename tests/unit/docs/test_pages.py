"""The docs read as reference: one H1 per page, and no paragraph stands on two pages (a fact has
one place; the other page links to it)."""
import re
from pathlib import Path

REPO = Path(__file__).parents[3]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "results" / "README.md"]


def prose(page: Path) -> list[str]:
    """The page's lines outside code blocks."""
    out, fence = [], False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence:
            out.append(line)
    return out


def paragraphs(page: Path) -> set[str]:
    """Its prose paragraphs of some length (a table row, a heading or a short line is not one),
    whitespace folded."""
    text = "\n".join(prose(page))
    found = set()
    for block in re.split(r"\n\s*\n", text):
        flat = " ".join(block.split())
        if len(flat) >= 160 and not flat.startswith(("|", "#")):
            found.add(flat)
    return found


def test_every_page_has_one_h1():
    for page in PAGES:
        h1 = [line for line in prose(page) if line.startswith("# ")]
        assert len(h1) == 1, f"{page.relative_to(REPO)}: {h1}"


def test_no_paragraph_stands_on_two_pages():
    seen: dict[str, Path] = {}
    for page in PAGES:
        for p in paragraphs(page):
            assert p not in seen, f"{page.relative_to(REPO)} repeats {seen[p].relative_to(REPO)}: {p[:120]}..."
            seen[p] = page


def test_the_configuration_pages_file_names_every_section_of_the_schema():
    sections = re.findall(r"^## (\[\[?[a-z_.]+\]\]?)$", (REPO / "docs" / "config-reference.md").read_text(), re.M)
    block = (REPO / "docs" / "configuration.md").read_text().split("```toml")[1].split("```")[0]
    named = set(re.findall(r"^(\[\[?[a-z_.]+\]\]?)", block, re.M))
    assert sections and not set(sections) - named, f"docs/configuration.md lacks {sorted(set(sections) - named)}"
