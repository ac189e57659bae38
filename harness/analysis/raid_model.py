"""What a RAID level should give, from one member device's figure: the standard model the RAID
studies compare their measurements with. Read = N, N-1 or N-2 data members; write = the level's
write penalty (mirror copies, or parity read-modify-write: 4 I/Os for RAID 5, 6 for RAID 6)."""
from __future__ import annotations

from fractions import Fraction

LEVELS = (0, 1, 5, 6, 10)
MIN_MEMBERS = {0: 2, 1: 2, 5: 3, 6: 4, 10: 4}


def member_count_problem(level: int, members: int) -> str | None:
    """Why `members` devices cannot form a RAID `level` array, or None."""
    if level not in LEVELS:
        return f"RAID level {level} is not one of {', '.join(map(str, LEVELS))}"
    need = MIN_MEMBERS[level]
    if members < need:
        return f"RAID {level} needs at least {need} member devices, got {members}"
    if level == 10 and members % 2:
        return f"RAID 10 needs an even number of member devices, got {members}"
    return None


def no_level_buildable(levels: list[int], members: int) -> str | None:
    """Why none of `levels` can be built on `members` devices (a settings error), or None."""
    problems = [member_count_problem(lv, members) for lv in levels]
    if all(problems):
        return (f"no RAID level in levels={levels} can be built with members={members} ({problems[0]}); "
                "raise members or choose another level")
    return None


def direction(rw: str) -> str:
    """'read' or 'write' for a fio access pattern (mixed patterns have no single expectation)."""
    if rw in ("read", "randread"):
        return "read"
    if rw in ("write", "randwrite"):
        return "write"
    raise ValueError(f"the RAID model covers read and write patterns, not {rw!r}")


def factor(level: int, members: int, rw: str) -> Fraction:
    """Expected array throughput as a multiple of one member's."""
    if problem := member_count_problem(level, members):
        raise ValueError(problem)
    n = members
    read = {0: n, 1: n, 10: n, 5: n - 1, 6: n - 2}[level]
    write = {0: Fraction(n), 1: Fraction(1), 10: Fraction(n, 2), 5: Fraction(n - 1, 4), 6: Fraction(n - 2, 6)}[level]
    return Fraction(read) if direction(rw) == "read" else write


def data_members(level: int, members: int) -> Fraction:
    """An array's capacity as a multiple of one member's."""
    if problem := member_count_problem(level, members):
        raise ValueError(problem)
    return Fraction({0: members, 1: 1, 5: members - 1, 6: members - 2, 10: Fraction(members, 2)}[level])


def expected(level: int, members: int, rw: str, single: float) -> float:
    return float(factor(level, members, rw)) * single


def stack_overhead(measured: float, expected_value: float) -> float:
    """The "software stack overhead": the share of the expected throughput the array did not deliver."""
    return 1 - measured / expected_value
