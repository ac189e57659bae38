"""Where a host keeps the guest image: named by the image's recipe, so a fleet's Terraform
variables stay the same while the image does, and a new image is uploaded beside the old one."""
import subprocess

from harness.fleet import host_images


def test_paths_are_named_by_the_recipe(tmp_path):
    (tmp_path / "recipe.sha").write_text("abc123\n")
    for name in host_images.FILES.values():
        (tmp_path / name).write_bytes(b"x")
    assert host_images.paths_on_host(tmp_path) == {
        "rootfs": "/var/lib/vtb/images/abc123-rootfs.qcow2", "kernel": "/var/lib/vtb/images/abc123-vmlinuz",
        "initrd": "/var/lib/vtb/images/abc123-initrd.img", "kernel_generic": "/var/lib/vtb/images/abc123-vmlinuz-generic",
        "initrd_generic": "/var/lib/vtb/images/abc123-initrd-generic.img"}


class _Host:
    """A host that is not this machine, whose `stat` answers with the sizes it is given (None: no
    such file), as stat does: the files it found, and a failure for the others."""
    keeps_guest_image = False
    is_this_machine = False

    def __init__(self, sizes: list[int] | None):
        self.sizes, self.commands = sizes, []

    def descriptor(self) -> dict:
        return {"kind": "ssh", "name": f"h{id(self)}"}

    def run(self, argv, **kw):
        self.commands.append(argv)
        found = [f"{size} {path}\n" for size, path in zip(self.sizes or [], argv[argv.index("--") + 1:]) if size is not None]
        status = 0 if self.sizes and None not in self.sizes else 1
        return subprocess.CompletedProcess(argv, status, "".join(found).encode(), b"stat: cannot statx: No such file")


def _image(tmp_path):
    (tmp_path / "recipe.sha").write_text("abc123\n")
    for i, name in enumerate(host_images.FILES.values()):
        (tmp_path / name).write_bytes(b"x" * (i + 1))
    return tmp_path


def test_a_host_that_holds_the_image_whole_keeps_it_and_is_asked_once(tmp_path):
    image = _image(tmp_path)
    host = _Host([1, 2, 3, 4, 5])
    assert host_images.kept_on(host, image) and host_images.kept_on(host, image)
    assert len(host.commands) == 1 and host.commands[0][-1] == "/var/lib/vtb/images/abc123-initrd-generic.img"


def test_a_host_without_the_image_or_with_a_cut_one_gets_it_per_fleet(tmp_path):
    image = _image(tmp_path)
    assert not host_images.kept_on(_Host(None), image)
    assert not host_images.kept_on(_Host([1, 2, 3, 4, 4]), image)   # the last file cut short
    assert not host_images.kept_on(_Host([1, 2, None, 4, 5]), image)   # one file missing


def test_this_machine_uses_the_image_where_it_is(tmp_path):
    host = _Host([1, 2, 3, 4, 5])
    host.is_this_machine = True
    assert not host_images.kept_on(host, _image(tmp_path)) and host.commands == []


def test_the_main_jobs_image_has_no_generic_kernel_and_is_kept_without_one(tmp_path):
    """The main job's image (images/build.sh guest) holds only the cloud kernel."""
    image = _image(tmp_path)
    for name in ("vmlinuz-generic", "initrd-generic.img"):
        (image / name).unlink()
    assert set(host_images.paths_on_host(image)) == {"rootfs", "kernel", "initrd"}
    host = _Host([1, 2, 3])
    assert host_images.kept_on(host, image) and host.commands[0][-1] == "/var/lib/vtb/images/abc123-initrd.img"
