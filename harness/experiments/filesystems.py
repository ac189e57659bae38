"""`harness run filesystems`: fio on a file in ext4/xfs/btrfs/f2fs/nilfs2, on an array against a single device, buffered and direct, PE and VE.
Config section [filesystems]; member devices from [raid]. Each point makes its filesystem afresh (the
VM on its own disk, which sits on the array); a filesystem the host cannot make is skipped with the reason."""
from harness.config import Config
from harness.experiments.raid_sweep import RaidSweep, Setup


class Filesystems(RaidSweep):
    name = "filesystems"
    section = "filesystems"

    def setups(self, cfg: Config) -> list[Setup]:
        c = cfg.filesystems
        return [Setup(None, 1, 0), Setup(c.level, c.members, cfg.raid.chunk_kib)]

    def filesystems(self, cfg: Config) -> list[str | None]:
        return list(cfg.filesystems.filesystems)


EXPERIMENT = Filesystems()
