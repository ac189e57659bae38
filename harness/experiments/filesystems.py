"""`harness run filesystems`: fio on a file in ext4/xfs/btrfs/f2fs/nilfs2, on an array against a single device, buffered and direct, PE and VE.
Config section [filesystems]; member devices from [raid]. Each point makes its filesystem afresh (the
VM on its own disk, which sits on the array); a filesystem the host cannot make is skipped with the reason."""
from pydantic import Field, model_validator

from harness.config import Config
from harness.experiments.raid_sweep import RaidSweep, RaidSweepSettings, Setup, raid_flags
from harness.raid import MIN_FS_MIB
from harness.schema import Filesystem, RaidLevel


class Settings(RaidSweepSettings):
    filesystems: list[Filesystem] = Field(["ext4", "xfs", "btrfs", "f2fs", "nilfs2"], min_length=1,
                                          description="filesystems to compare")
    level: RaidLevel = Field(0, description="RAID level of the array (compared with a single device)")
    members: int = Field(4, ge=2, le=64, description="member devices of the array")
    size_mib: int = Field(300, ge=16, description="the region each filesystem is made on (host and VM alike); "
                                                  "xfs needs 300 MiB")

    @model_validator(mode="after")
    def _every_filesystem_fits(self) -> "Settings":
        """Rejected before anything is provisioned: mkfs would refuse the region mid-run."""
        for fs in self.filesystems:
            if self.size_mib < MIN_FS_MIB.get(fs, 0):
                raise ValueError(f"filesystems.size_mib={self.size_mib} is below the {MIN_FS_MIB[fs]} MiB mkfs.{fs} "
                                 f"needs; raise size_mib to {MIN_FS_MIB[fs]} or remove {fs} from filesystems")
        return self


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
