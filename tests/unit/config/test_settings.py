"""Plugins own their settings: the config and the `harness run` commands are assembled from the
experiment and backend registries, and command-line values are typed by the fields they set."""
from types import SimpleNamespace
from typing import Literal

import pytest
from click.testing import CliRunner
from pydantic import Field

from harness import backends, cli
from harness.backends.base import Backend
from harness.common.schema import ConfigError, Section
from harness.engine import runner, settings
from harness.experiments import Flag, registry
from harness.results.metrics import Direction, direction


def test_every_experiment_has_its_own_section_from_its_own_settings_model():
    fields = settings.model().model_fields
    for exp in registry().values():
        assert fields[exp.section].annotation is exp.Settings, exp.name
        assert exp.headline and isinstance(direction(exp.headline), Direction)
    cfg = settings.load(None)
    assert cfg.vm_scaling.vm_counts == [1, 2, 4] and cfg.latency.patterns[0] == "randread"


def test_an_experiment_whose_headline_has_no_direction_is_refused_where_it_is_defined():
    from harness.experiments import defined
    with pytest.raises(TypeError, match="its headline 'wobble' has no declared direction.*metrics.py"):
        defined({"toy": SimpleNamespace(headline="wobble")})


# what runner.run returns for a run that measured nothing (the command reads its samples)
NOTHING_MEASURED = SimpleNamespace(store=SimpleNamespace(samples=[], run_id="toy", manifest={}))


class ToySettings(Section):
    widgets: list[int] = Field([1], min_length=1, description="widgets per point")
    mode: Literal["fast", "slow"] = Field("fast", description="toy mode")


class Toy:
    """toy: an experiment declared in one module only."""
    name, section, Settings = "toy", "toy", ToySettings
    question = "How many widgets a second"
    headline = "widgets_per_s"
    uses_fleet = False
    flags = (Flag("--widgets", ("toy.widgets",)), Flag("--slow", ("toy.mode",), "Run slowly.", switch="slow"))


@pytest.fixture
def toy_registered(monkeypatch):
    """A new experiment that exists only in the registry, as if its module had been added."""
    registered = {**registry(), "toy": Toy()}
    monkeypatch.setattr("harness.experiments.registry", lambda: registered)
    settings.model.cache_clear()
    yield
    settings.model.cache_clear()


def test_a_new_experiment_gets_a_config_section_and_a_command_from_its_module_alone(toy_registered, monkeypatch):
    assert settings.load(None, ["toy.widgets=3,5"]).toy.widgets == [3, 5]
    with pytest.raises(ConfigError, match=r"toy\.mode"):
        settings.load(None, ["toy.mode=medium"])
    seen = {}
    monkeypatch.setattr(runner, "run", lambda cfg, name, **_: seen.update(cfg=cfg, name=name) or NOTHING_MEASURED)
    out = CliRunner().invoke(cli.cli, ["run", "toy", "--widgets", "2,4", "--slow"])
    assert out.exit_code == 0, out.output
    assert seen["name"] == "toy" and seen["cfg"].toy.widgets == [2, 4] and seen["cfg"].toy.mode == "slow"
    assert "Widgets per point" in CliRunner().invoke(cli.cli, ["run", "toy", "--help"]).output


def run_with(monkeypatch, *args):
    seen = {}
    monkeypatch.setattr(runner, "run", lambda cfg, name, **_: seen.update(cfg=cfg, name=name) or NOTHING_MEASURED)
    out = CliRunner().invoke(cli.cli, ["run", *args])
    assert out.exit_code == 0, out.output
    return seen["cfg"]


def test_flags_set_typed_fields_not_strings_parsed_back(monkeypatch):
    cfg = run_with(monkeypatch, "vm-scaling", "--vm-counts", "4,1", "--runtime", "3", "--backend", "nvme",
                   "--rw", "randwrite")
    assert cfg.vm_scaling.vm_counts == [1, 4] and cfg.vm_scaling.job.runtime_s == 3
    assert cfg.vm_scaling.backends == ["nvme"] and cfg.vm_scaling.job.rw == "randwrite"
    assert runner.configured(registry()["vm-scaling"], cfg).disk.backend == "nvme"   # one backend: the fleet's
    cfg = run_with(monkeypatch, "backends", "--runtime", "5", "--backend", "virtio-blk,nvme")
    assert cfg.backends.runtime_s == 5 and registry()["backends"].points(cfg)[0].job.runtime_s == 5
    assert cfg.backends.backends == ["virtio-blk", "nvme"]
    assert run_with(monkeypatch, "raid-levels", "--pe-only").raid_levels.ve is False
    assert run_with(monkeypatch, "mysql", "--tests", "oltp_write_only").mysql.tests == ["oltp_write_only"]


def test_set_values_are_typed_by_their_field():
    assert settings.load(None, ["fleet.name=123"]).fleet.name == "123"          # text stays text
    assert settings.load(None, ["vm_scaling.vm_counts=[2,1]"]).vm_scaling.vm_counts == [1, 2]
    assert settings.load(None, ["vm_scaling.vm_counts=2,1"]).vm_scaling.vm_counts == [1, 2]
    assert settings.load(None, ["raid.allow=[/dev/a,/dev/b]"]).raid.allow == ["/dev/a", "/dev/b"]
    assert settings.load(None, ['raid.allow=["/dev/a"]']).raid.allow == ["/dev/a"]
    assert settings.load(None, ["raid_levels.direct=true"]).raid_levels.direct == [True]
    with pytest.raises(ConfigError, match=r"fleet\.vms"):
        settings.load(None, ["fleet.vms=two"])


def test_each_backend_declares_its_own_disk_fields():
    fields = settings.model().model_fields["disk"].annotation.model_fields
    for b in backends.all_backends().values():
        assert set(b.Options.model_fields) <= set(fields), b.name
    assert settings.load(None, ["disk.backend=vhost-user-blk-qsd", "disk.qsd_per=device"]).disk.qsd_per == "device"
    with pytest.raises(ConfigError, match=r"disk\.qsd_per: not supported by virtio-blk"):
        settings.load(None, ["disk.qsd_per=device"])


def test_two_backends_cannot_claim_the_same_disk_field(monkeypatch):
    class Clash(Section):
        qsd_per: str = "x"

    class ClashBackend(Backend):
        name, Options = "clash", Clash

    known = backends.all_backends()
    monkeypatch.setattr(backends, "all_backends", lambda: {**known, "clash": ClashBackend()})
    with pytest.raises(TypeError, match="qsd_per"):
        backends.option_fields()
