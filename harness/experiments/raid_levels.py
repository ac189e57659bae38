"""`harness run raid-levels`: RAID level x member count x direct/buffered, seq/rand read/write, PE and VE, against the RAID model.
Config section [raid_levels]; member devices from [raid]."""
from typing import Literal

from pydantic import Field, model_validator

from harness.analysis.raid_model import member_count_problem
from harness.common.schema import PositiveInts, RaidLevel
from harness.config.core import Config
from harness.experiments.raid_sweep import RaidSweep, RaidSweepSettings, Setup, raid_flags


class Settings(RaidSweepSettings):
    FULL = {"patterns": ["read", "write", "randread", "randwrite"], "direct": [True, False]}
    patterns: list[Literal["read", "write", "randread", "randwrite"]] = Field(
        ["read", "randwrite"], min_length=1, description="fio access patterns (full: all four)")
    direct: list[bool] = Field([True], min_length=1, description="direct (O_DIRECT) and/or buffered I/O "
                                                                 "(full: both)")
    levels: list[RaidLevel] = Field([0, 1, 5, 10], min_length=1, description="RAID levels to sweep")
    member_counts: PositiveInts = Field([4], min_length=1, description="member counts to sweep")

    @model_validator(mode="after")
    def _some_setup_valid(self) -> "Settings":
        """Rejected before anything boots when no level x member count can be built."""
        problems = [member_count_problem(lv, n) for lv in self.levels for n in self.member_counts]
        if all(problems):
            raise ValueError(f"no RAID level in levels={self.levels} can be built with member_counts="
                             f"{self.member_counts} ({problems[0]}); add a member count that fits a level, "
                             "or a level that fits a count")
        return self


class RaidLevels(RaidSweep):
    question = "Which RAID level, against the RAID model, PE and VE"
    name = "raid-levels"
    section = "raid_levels"
    Settings = Settings
    flags = raid_flags("raid_levels")

    def setups(self, cfg: Config) -> list[Setup]:
        c = cfg.raid_levels
        return [Setup(None, 1, 0)] + [Setup(level, n, cfg.raid.chunk_kib) for level in c.levels
                                      for n in c.member_counts]


EXPERIMENT = RaidLevels()
