"""The guest image a fleet boots (Testbed.image_dir): the main job's, unless the config asks for the
full one (or for the generic kernel, only in it), the host holds the full one (a nested host's image
carries it), or the fleet runs it already: a fleet of fio's guests is served by it as it is."""
from __future__ import annotations

import json

import pytest

from harness.common import paths
from harness.engine import settings
from harness.fleet import testbed
from harness.hosts import LocalHost


class NestedLike(LocalHost):
    keeps_guest_image = True


@pytest.fixture
def images(tmp_path, monkeypatch):
    main, full = tmp_path / "images" / "current", tmp_path / "images" / "full-current"
    for d, key in ((main, "abc"), (full, "full-abc")):
        d.mkdir(parents=True)
        (d / "recipe.sha").write_text(f"{key}\n")
    monkeypatch.setattr(paths, "IMAGE_DIR", main)
    monkeypatch.setattr(paths, "FULL_IMAGE_DIR", full)
    return main, full


def bed(tmp_path, *overrides, host=None) -> testbed.Testbed:
    return testbed.Testbed(settings.load(None, [f"state_dir={tmp_path / 'state'}", *overrides]), host or LocalHost())


def test_the_main_jobs_image_unless_the_full_one_is_asked_or_held(tmp_path, images):
    main, full = images
    assert bed(tmp_path).image_dir == main
    assert bed(tmp_path, "fleet.image=full").image_dir == full
    assert bed(tmp_path, "fleet.kernel=generic").image_dir == full
    assert bed(tmp_path, host=NestedLike()).image_dir == full


def test_a_fleet_that_runs_the_full_image_keeps_it_for_fio(tmp_path, images):
    main, full = images
    b = bed(tmp_path)
    b.record_path.parent.mkdir(parents=True)
    b.record_path.write_text(json.dumps({"image": "full-abc"}))
    assert bed(tmp_path).image_dir == full
    b.record_path.write_text(json.dumps({"image": "full-older"}))   # an image of another recipe: not kept
    assert bed(tmp_path).image_dir == main
