"""`harness run raid-levels`: RAID level x member count x direct/buffered, seq/rand read/write, PE and VE, against the RAID model.
Config section [raid_levels]; member devices from [raid]."""
from harness.config import Config
from harness.experiments.raid_sweep import RaidSweep, Setup


class RaidLevels(RaidSweep):
    name = "raid-levels"
    section = "raid_levels"

    def setups(self, cfg: Config) -> list[Setup]:
        c = cfg.raid_levels
        return [Setup(None, 1, 0)] + [Setup(level, n, cfg.raid.chunk_kib) for level in c.levels
                                      for n in c.member_counts]


EXPERIMENT = RaidLevels()
