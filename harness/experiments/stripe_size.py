"""`harness run stripe-size`: chunk size sweep for RAID 0 and RAID 5, PE and VE, against the RAID model.
Config section [stripe_size]; member devices from [raid]."""
from harness.config import Config
from harness.experiments.raid_sweep import RaidSweep, Setup


class StripeSize(RaidSweep):
    name = "stripe-size"
    section = "stripe_size"

    def setups(self, cfg: Config) -> list[Setup]:
        c = cfg.stripe_size
        return [Setup(None, 1, 0)] + [Setup(level, c.members, chunk) for level in c.levels
                                      for chunk in c.chunks_kib if level != 1]


EXPERIMENT = StripeSize()
