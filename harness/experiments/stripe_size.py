"""`harness run stripe-size`: chunk size sweep for RAID 0 and RAID 5, PE and VE, against the RAID model.
Config section [stripe_size]; member devices from [raid]."""
from typing import Literal

from pydantic import Field, model_validator

from harness.analysis.raid_model import no_level_buildable
from harness.common.schema import ChunkKib, RaidLevel
from harness.config.core import Config
from harness.experiments.raid_sweep import RaidSweep, RaidSweepSettings, Setup, raid_flags


class Settings(RaidSweepSettings):
    FULL = {"levels": [0, 5], "chunks_kib": [64, 128, 256, 512, 1024],
            "patterns": ["read", "write", "randread", "randwrite"], "direct": [True, False]}
    levels: list[RaidLevel] = Field([5], min_length=1, description="RAID levels to sweep (full: 0 and 5)")
    members: int = Field(4, ge=2, le=64, description="member devices per array")
    chunks_kib: list[ChunkKib] = Field([64, 256, 1024], min_length=1,
                                       description="chunk sizes to sweep (full: 64 to 1024 KiB)")
    patterns: list[Literal["read", "write", "randread", "randwrite"]] = Field(
        ["read", "write"], min_length=1, description="fio access patterns (full: all four)")
    direct: list[bool] = Field([True], min_length=1, description="direct (O_DIRECT) and/or buffered I/O "
                                                                 "(full: both)")

    @model_validator(mode="after")
    def _some_level_valid(self) -> "Settings":
        if why := no_level_buildable(self.levels, self.members):
            raise ValueError(why)
        return self


class StripeSize(RaidSweep):
    question = "Which RAID chunk size, PE and VE"
    name = "stripe-size"
    section = "stripe_size"
    Settings = Settings
    flags = raid_flags("stripe_size")

    def setups(self, cfg: Config) -> list[Setup]:
        c = cfg.stripe_size
        return [Setup(None, 1, 0)] + [Setup(level, c.members, chunk) for level in c.levels
                                      for chunk in c.chunks_kib if level != 1]


EXPERIMENT = StripeSize()
