"""mysql's physical baseline needs a block device on the host: a fleet of Ceph images is refused
before anything is made, with the fix; other backends are not."""
from harness.engine import settings
from harness.experiments import registry


def test_a_fleet_of_ceph_images_is_refused_before_anything_is_made():
    mysql = registry()["mysql"]
    why = mysql.refusal(settings.load(None, ["disk.backend=rbd"]))
    assert why is not None and "Ceph images" in why and "Fix: --set disk.backend=virtio-blk" in why
    assert mysql.refusal(settings.load(None, ["disk.backend=virtio-blk"])) is None
