"""Which guest image a run's fleets boot: the main job's (fio's guests) unless the experiment's
guests run more than fio, which asks for the full one (fleet.image), built on its first use."""
from __future__ import annotations

import pytest

from harness.engine import settings
from harness.engine.runner import configured
from harness.experiments import registry


@pytest.mark.parametrize("name, overrides, image", [
    ("vm-scaling", [], "fio"),
    ("iops", [], "fio"),
    ("mysql", [], "full"),                                  # MariaDB and sysbench
    ("mysql-raid", [], "full"),
    ("rocksdb", [], "full"),                                # db_bench
    ("latency", [], "fio"),
    ("latency", ['latency.tools=["fio","ioping"]'], "full"),
    ("filesystems", [], "full"),                            # f2fs: its tools and the generic kernel
    ("filesystems", ['filesystems.filesystems=["ext4"]'], "fio"),
    ("raid-levels", [], "fio"),
])
def test_an_experiment_whose_guests_run_more_than_fio_asks_for_the_full_image(name, overrides, image):
    experiment = registry()[name]
    asked = experiment.guest_image(settings.load(None, overrides)) if hasattr(experiment, "guest_image") else "fio"
    assert asked == image


def test_the_run_reads_the_config_with_the_image_its_guests_need_and_a_users_full_image_stands():
    assert configured(registry()["mysql"], settings.load(None, [])).fleet.image == "full"
    assert configured(registry()["vm-scaling"], settings.load(None, [])).fleet.image == "fio"
    assert configured(registry()["vm-scaling"], settings.load(None, ["fleet.image=full"])).fleet.image == "full"
