from fractions import Fraction

import pytest

from harness.analysis import raid_model as m


@pytest.mark.parametrize("level,n,rw,want", [
    (0, 4, "randread", 4), (0, 4, "write", 4),
    (1, 2, "read", 2), (1, 3, "randwrite", 1),
    (10, 4, "read", 4), (10, 6, "write", 3),
    (5, 4, "read", 3), (5, 5, "randwrite", 1),
    (6, 8, "read", 6), (6, 8, "write", 1),
    (6, 4, "write", Fraction(1, 3)),
])
def test_factor_per_level(level, n, rw, want):
    assert m.factor(level, n, rw) == want


def test_expected_and_overhead():
    assert m.expected(5, 4, "read", 1000.0) == 3000.0
    assert m.stack_overhead(2400.0, 3000.0) == pytest.approx(0.2)
    assert m.stack_overhead(3300.0, 3000.0) == pytest.approx(-0.1)  # better than the model: negative


@pytest.mark.parametrize("level,n,why", [
    (5, 2, "RAID 5 needs at least 3 member devices, got 2"),
    (6, 3, "RAID 6 needs at least 4 member devices, got 3"),
    (10, 2, "RAID 10 needs at least 4 member devices, got 2"),
    (10, 5, "RAID 10 needs an even number of member devices, got 5"),
    (0, 1, "RAID 0 needs at least 2 member devices, got 1"),
    (1, 1, "RAID 1 needs at least 2 member devices, got 1"),
    (4, 4, "RAID level 4 is not one of 0, 1, 5, 6, 10"),
])
def test_member_limits(level, n, why):
    assert m.member_count_problem(level, n) == why
    with pytest.raises(ValueError, match=why):
        m.factor(level, n, "read")


@pytest.mark.parametrize("level,n", [(5, 3), (6, 4), (10, 4), (0, 2), (1, 2), (10, 8)])
def test_smallest_valid_counts(level, n):
    assert m.member_count_problem(level, n) is None


def test_mixed_pattern_has_no_expectation():
    with pytest.raises(ValueError, match="randrw"):
        m.factor(0, 2, "randrw")
