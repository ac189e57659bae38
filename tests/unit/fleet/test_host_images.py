"""Where a nested host keeps the guest image: named by the image's recipe, so a fleet's Terraform
variables stay the same while the image does, and a new image is uploaded beside the old one."""
from harness.fleet import host_images


def test_paths_are_named_by_the_recipe(tmp_path):
    (tmp_path / "recipe.sha").write_text("abc123\n")
    assert host_images.paths_on_host(tmp_path) == {
        "rootfs": "/var/lib/vtb/images/abc123-rootfs.qcow2", "kernel": "/var/lib/vtb/images/abc123-vmlinuz",
        "initrd": "/var/lib/vtb/images/abc123-initrd.img", "kernel_generic": "/var/lib/vtb/images/abc123-vmlinuz-generic",
        "initrd_generic": "/var/lib/vtb/images/abc123-initrd-generic.img"}
