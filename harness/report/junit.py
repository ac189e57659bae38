"""`harness compare --junit FILE`: the comparison as JUnit XML, which CI systems read: a test case
per point and metric, failed where the change is a significant regression beyond --min-change,
skipped where no test could be made, each with its numbers; and a failed case per point the run
under test lost (measured in A, failed or missing in B)."""
from __future__ import annotations

from pathlib import Path

from junitparser import Failure, JUnitXml, Skipped, TestCase, TestSuite

from harness.analysis.compare import Change, Lost, place, point_name
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


def lost_case(lost: Lost) -> TestCase:
    test = TestCase(f"{point_name(lost.point)} {place(lost.point)}", f"vtb.{lost.point[0]}")
    test.result = [Failure(f"not measured in B: {lost.why}", "lost")]
    return test


def write(changes: list[Change], path: Path, name: str, lost: list[Lost] = ()) -> Path:
    """A case per compared metric, and a failed one per point B lost."""
    suite = TestSuite(name)
    for c in changes:
        suite.add_testcase(case(c))
    for point in lost:
        suite.add_testcase(lost_case(point))
    xml = JUnitXml()
    xml.add_testsuite(suite)
    write_atomic(path, xml.tostring())
    return path
