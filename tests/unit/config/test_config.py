import json
import subprocess
from pathlib import Path

import pytest

from harness.config.core import ConfigError
from harness.engine import settings


def load(*overrides, path=None):
    return settings.load(path, list(overrides))


def test_defaults_are_valid():
    cfg = load()
    assert cfg.fleet.vms == 2 and cfg.disk.backend == "virtio-blk"
    assert cfg.vm_scaling.vm_counts == [1, 2, 4]
    assert cfg.vm_scaling.job.bs == "4k" and cfg.vm_scaling.job.direct


def test_overrides_parse_json_values():
    cfg = load("fleet.vms=3", "vm_scaling.vm_counts=[4,1]", "vm_scaling.job.direct=false", "disk.cache=none")
    assert cfg.fleet.vms == 3 and cfg.vm_scaling.vm_counts == [1, 4] and cfg.vm_scaling.job.direct is False


@pytest.mark.parametrize("value", ["['read', 'write']", '["read","write"]', "read,write", "[read, write]"])
def test_a_list_override_reads_as_the_config_file_would_hold_it(value):
    assert load(f"ceph_scaling.patterns={value}").ceph_scaling.patterns == ["read", "write"]   # TOML, JSON or items


def test_file_plus_overrides(tmp_path):
    f = tmp_path / "h.toml"
    f.write_text('[fleet]\nvms = 3\n[vm_scaling.job]\niodepth = 4\n')
    cfg = load("vm_scaling.job.iodepth=8", path=f)
    assert cfg.fleet.vms == 3 and cfg.vm_scaling.job.iodepth == 8


@pytest.mark.parametrize("override, field, hint", [
    ("fleet.vmz=2", "fleet.vmz", "unknown key"),
    ("fleet.vms=-1", "fleet.vms", "greater than or equal to 1"),
    ("vm_scaling.job.iodepth=0", "vm_scaling.job.iodepth", "greater than or equal to 1"),
    ("vm_scaling.vm_counts=[0,2]", "vm_scaling.vm_counts", ">= 1"),
    ("disk.backend=virtio-foo", "disk.backend", "null, nvme, passthrough-block, qcow2, rbd"),   # listed in order
    ("disk.iothreads=-1", "disk.iothreads", "greater than or equal to 0"),
    ("fleet.device=/dev/does-not-exist", "fleet.device", "does not exist"),
    ("vm_scaling.job.bs=4q", "vm_scaling.job.bs", "pattern"),
])
def test_bad_values_name_the_field_and_the_fix(override, field, hint):
    with pytest.raises(ConfigError) as e:
        load(override)
    msg = str(e.value)
    assert field in msg and hint in msg and ("Fix:" in msg or "choose" in msg)


def test_aio_native_needs_direct_cache():
    with pytest.raises(ConfigError, match="aio=native needs cache=none"):
        load("disk.cache=writeback", "disk.aio=native")
    assert load("disk.cache=writeback", "disk.aio=io_uring").disk.cache == "writeback"


def test_fleet_larger_than_host_memory_is_refused():
    with pytest.raises(ConfigError, match="fleet.vms=64 x fleet.memory_mib=65536"):
        load("fleet.vms=64", "fleet.memory_mib=65536")


def test_system_disk_is_refused():
    root = next((l.split()[0] for l in Path("/proc/mounts").read_text().splitlines()
                 if l.split()[1] == "/" and l.startswith("/dev/")), None)
    if root is None or not Path(root).is_block_device():
        pytest.skip("the root filesystem is not on a block device here")
    with pytest.raises(ConfigError, match="the host's system disk .* which holds /"):
        load(f"fleet.device={root}")


def test_regular_file_is_not_a_device(tmp_path):
    f = tmp_path / "disk.img"
    f.write_bytes(b"\0" * 4096)
    with pytest.raises(ConfigError, match="not a block device"):
        load(f"fleet.device={f}")


def test_bad_toml_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load(path=tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[fleet\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load(path=bad)


def test_bad_override_syntax():
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        load("fleet.vms")


def test_cli_bad_input_exits_2_with_the_field(tmp_path):
    out = subprocess.run(["harness", "testbed", "up", "--set", f"state_dir={tmp_path}", "--set", "fleet.vms=-1"],
                         capture_output=True, text=True, env={"PATH": str(Path(__import__("sys").executable).parent)})
    assert out.returncode == 2
    assert "fleet.vms" in out.stdout + out.stderr
    assert not any(tmp_path.iterdir())  # nothing provisioned, nothing written


def test_option_the_backend_does_not_support_is_refused():
    with pytest.raises(ConfigError, match=r"disk.iothreads: not supported by vhost-user-blk-qsd .*remove it"):
        load("disk.backend=vhost-user-blk-qsd", "disk.iothreads=1")
    assert load("disk.backend=vhost-user-blk-qsd").disk.backend == "vhost-user-blk-qsd"  # defaults are fine


def test_passthrough_needs_cache_none():
    with pytest.raises(ConfigError, match="passthrough-block needs disk.cache=none"):
        load("disk.backend=passthrough-block", "disk.cache=writeback", "disk.aio=io_uring")


def test_with_backend_keeps_only_options_it_takes():
    disk = load("disk.iothreads=2", "disk.num_queues=2").disk
    assert disk.with_backend("nvme").model_fields_set == {"backend", "num_queues"}
    assert disk.with_backend("virtio-scsi").iothreads == 2


@pytest.mark.parametrize("section", ["latency", "iops", "bandwidth", "backends"])
def test_sweep_sections_check_backend_names(section):
    with pytest.raises(ConfigError, match=f"{section}.backends: unknown backend 'nvmx'"):
        load(f'{section}.backends=["nvmx"]')


@pytest.mark.parametrize("key", ["state_dir", "hosts"])
@pytest.mark.parametrize("bad", ["/srv/it's", "/srv/$(reboot)", "relative/dir", '/srv/a"b', "/srv/{x}"])
def test_a_state_dir_a_shell_or_xml_would_read_as_syntax_is_refused_naming_the_field(key, bad):
    """state_dir reaches shell commands, Terraform and libvirt XML, here and on every [[hosts]] entry."""
    override = (f"state_dir={bad}" if key == "state_dir" else
                f'hosts=[{{"name": "h", "ssh": "root@192.0.2.1", "devices": ["/dev/sdb"], "state_dir": {json.dumps(bad)}}}]')
    with pytest.raises(ConfigError, match=rf"{key}.*absolute path of letters.*Fix: choose another folder"):
        settings.load(None, [override])


def test_a_state_dir_with_spaces_is_fine():
    assert settings.load(None, ["state_dir=/srv/my data"]).state_dir == Path("/srv/my data")


def test_fleet_device_is_checked_on_this_machine_only_when_the_fleet_is_here():
    """A disk named for a nested or [[hosts]] host is that host's: this machine's disk of the same
    name says nothing about it (the testbed checks it there, before use)."""
    with pytest.raises(ConfigError, match="fleet.device: /dev/vtb-no-such-disk does not exist"):
        settings.load(None, ["fleet.device=/dev/vtb-no-such-disk"])
    assert settings.load(None, ["fleet.device=/dev/vtb-no-such-disk", "host.kind=nested"]).fleet.device
    hosts = 'hosts=[{"name": "h", "ssh": "root@192.0.2.1", "devices": ["/dev/vtb-no-such-disk"]}]'
    assert settings.load(None, ["fleet.device=/dev/vtb-no-such-disk", hosts]).fleet.device
