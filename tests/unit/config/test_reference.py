"""The configuration reference is generated from the schema, and the page in docs/ is that output."""
from pathlib import Path

from harness.cli.config_reference import markdown

PAGE = Path(__file__).parents[3] / "docs" / "config-reference.md"


def test_the_page_is_the_schema_now():
    assert PAGE.read_text() == markdown(), "docs/config-reference.md is stale: harness config reference > it"


def test_it_names_every_section_with_defaults_ranges_and_descriptions():
    text = markdown()
    for section in ("## [fleet]", "## [[hosts]]", "## [vm_scaling.job]", "## [fio_job]", "## [repeat]"):
        assert section in text, section
    assert "| `count` | int | `3` | >= 1, <= 1000 | repeats of every point" in text
    assert "`<checkout>/results`" in text   # no machine's own path
