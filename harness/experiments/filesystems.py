"""`harness run filesystems`: fio on a file in ext4/xfs/btrfs/f2fs/nilfs2, on an array against a single device, buffered and direct, PE and VE.
Config section [filesystems]; member devices from [raid]. Each point makes its filesystem afresh (the
VM on its own disk, which sits on the array); a filesystem the host cannot make is skipped with the reason."""
from pydantic import Field

from harness.config import Config
from harness.experiments.raid_sweep import RaidSweep, RaidSweepSettings, Setup, raid_flags
from harness.schema import Filesystem, RaidLevel


class Settings(RaidSweepSettings):
    filesystems: list[Filesystem] = Field(["ext4", "xfs", "btrfs", "f2fs", "nilfs2"], min_length=1,
                                          description="filesystems to compare")
    level: RaidLevel = Field(0, description="RAID level of the array (compared with a single device)")
    members: int = Field(4, ge=2, le=64, description="member devices of the array")


class Filesystems(RaidSweep):
    name = "filesystems"
    section = "filesystems"
    Settings = Settings
    flags = raid_flags("filesystems")

    def setups(self, cfg: Config) -> list[Setup]:
        c = cfg.filesystems
        return [Setup(None, 1, 0), Setup(c.level, c.members, cfg.raid.chunk_kib)]

    def filesystems(self, cfg: Config) -> list[str | None]:
        return list(cfg.filesystems.filesystems)


EXPERIMENT = Filesystems()
