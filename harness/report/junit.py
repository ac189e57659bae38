"""`harness compare --junit FILE`: the comparison as JUnit XML, which CI systems read: a test case
per point and metric, failed where the change is a significant regression beyond --min-change,
skipped where no test could be made, each with its numbers."""
from __future__ import annotations

from pathlib import Path

from junitparser import Failure, JUnitXml, Skipped, TestCase, TestSuite

from harness.analysis.compare import Change, place, point_name
from harness.analysis.stats import p_text, summarize
from harness.common.files import write_atomic


def numbers(c: Change) -> str:
    """What the case measured: both means, the change with its CI, and the test's p."""
    change = c.diff.percent() if c.diff else f"{c.rel_change:+.1%}"
    tested = f", {p_text(c.p_value)} (Holm-adjusted)" if c.p_value is not None else ", no test (one repeat a side, or no spread)"
    return f"A {summarize(c.a).mean:,.1f} (n={len(c.a)}) -> B {summarize(c.b).mean:,.1f} (n={len(c.b)}): {change}{tested}"


def case(c: Change) -> TestCase:
    test = TestCase(f"{point_name(c.key)} {place(c.key)} {c.key[-1]}", f"vtb.{c.key[0]}")
    if c.regression:
        test.result = [Failure(f"regression: {numbers(c)}", "regression")]
    elif c.p_value is None:
        test.result = [Skipped(f"not tested: {numbers(c)}")]
    test.system_out = numbers(c)   # after the result, as the schema orders them
    return test


def write(changes: list[Change], path: Path, name: str) -> Path:
    suite = TestSuite(name)
    for c in changes:
        suite.add_testcase(case(c))
    xml = JUnitXml()
    xml.add_testsuite(suite)
    write_atomic(path, xml.tostring())
    return path
