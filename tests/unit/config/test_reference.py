"""The configuration reference is generated from the schema, and the page in docs/ is that output."""
import re
from pathlib import Path

from harness.cli.config_reference import markdown, sections

PAGE = Path(__file__).parents[3] / "docs" / "config-reference.md"


def test_the_page_is_the_schema_now():
    assert PAGE.read_text() == markdown(), "docs/config-reference.md is stale: harness config reference > it"


def test_it_names_every_section_with_defaults_ranges_and_descriptions():
    text = markdown()
    for section in ("## [fleet]", "## [[hosts]]", "## [vm_scaling.job]", "## [fio_job]", "## [repeat]"):
        assert section in text, section
    assert "| `count` | int | `3` | >= 1, <= 1000 | repeats of every point" in text
    assert "`<checkout>/results`" in text   # no machine's own path


def test_the_configuration_pages_sketch_of_the_sections_is_the_schema_now():
    """docs/configuration.md once copied the section list by hand and lost fields (qcow2's, vm_scaling's
    backends, job_file and profile, nested.shared_subnet): it holds the generated sketch."""
    page = (PAGE.parent / "configuration.md").read_text()
    found = re.search(r"<!-- begin: sections \(harness config reference --sections\) -->\n(.*?)<!-- end: sections -->",
                      page, re.S)
    assert found and found.group(1) == sections(), "docs/configuration.md: paste `harness config reference --sections`"
    for field in ("qcow2_preallocation", "job_file", "shared_subnet"):
        assert field in found.group(1)
