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


@pytest.mark.parametrize("level,n,want", [(0, 4, 4), (1, 4, 1), (5, 4, 3), (6, 4, 2), (10, 4, 2)])
def test_capacity_in_members(level, n, want):
    assert m.data_members(level, n) == want


def test_a_region_larger_than_a_setup_is_refused_before_provisioning():
    from harness.experiments.raid_sweep import RaidSweep, Setup
    single, raid1, raid0 = Setup(None, 1, 0), Setup(1, 4, 512), Setup(0, 4, 512)
    assert RaidSweep.too_small([320] * 4, [single, raid1, raid0], 300) is None
    assert RaidSweep.too_small([256] * 4, [single, raid0], 300) == \
        "single holds about 256 MiB (members of 256 MiB), less than the 300 MiB region"
    assert "raid1-n4-c512k holds about 304 MiB" in RaidSweep.too_small([312] * 4, [raid1], 310)


def test_the_filesystems_region_holds_xfs_and_a_smaller_one_is_refused_by_name():
    from harness.experiments.filesystems import Settings
    assert Settings().size_mib >= 300 and "xfs" in Settings(full=True).filesystems   # --full's xfs fits
    with pytest.raises(ValueError, match=r"filesystems.size_mib=128 .* mkfs.xfs .* remove xfs"):
        Settings(size_mib=128, filesystems=["ext4", "xfs"])
    assert Settings(size_mib=128, filesystems=["ext4", "btrfs"]).size_mib == 128
