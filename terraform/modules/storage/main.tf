# A directory pool holding the guest image, kernel and initrd (uploaded through libvirt, so the
# host may be remote), unless the host keeps them in its own pool (a nested host:
# harness/fleet/host_images.py); VM root disks are qcow2 overlays on the image.
terraform {
  required_providers {
    libvirt = { source = "dmacvicar/libvirt" }
  }
}
variable "prefix" { type = string }
variable "pool_dir" { type = string }
variable "image" {
  description = "The guest image's files; on_host: already in the host's own pool (a nested host), used in place."
  type = object({
    rootfs  = string
    kernel  = string
    initrd  = string
    on_host = bool
  })
}
variable "device_bytes" {
  description = "Size of the host device file to create; 0 when the user named a block device."
  type        = number
}

resource "libvirt_pool" "this" {
  name = var.prefix
  type = "dir"
  target {
    path = var.pool_dir
  }
}

resource "libvirt_volume" "base" {
  count  = var.image.on_host ? 0 : 1
  name   = "${var.prefix}-base.qcow2"
  pool   = libvirt_pool.this.name
  source = var.image.rootfs
  format = "qcow2"
}

resource "libvirt_volume" "kernel" {
  count  = var.image.on_host ? 0 : 1
  name   = "${var.prefix}-${basename(var.image.kernel)}" # a kernel of another kind is another volume
  pool   = libvirt_pool.this.name
  source = var.image.kernel
  format = "raw"
}

resource "libvirt_volume" "initrd" {
  count  = var.image.on_host ? 0 : 1
  name   = "${var.prefix}-${basename(var.image.initrd)}"
  pool   = libvirt_pool.this.name
  source = var.image.initrd
  format = "raw"
}

moved {
  from = libvirt_volume.base
  to   = libvirt_volume.base[0]
}
moved {
  from = libvirt_volume.kernel
  to   = libvirt_volume.kernel[0]
}
moved {
  from = libvirt_volume.initrd
  to   = libvirt_volume.initrd[0]
}

# The default host "device": a raw file in the pool, prefilled with random data because a
# sparse or zero-allocated file is read without any I/O and gives meaningless numbers.
resource "libvirt_volume" "device" {
  count  = var.device_bytes > 0 ? 1 : 0
  name   = "${var.prefix}-device.raw"
  pool   = libvirt_pool.this.name
  size   = var.device_bytes
  format = "raw"
}

resource "terraform_data" "prefill" {
  count            = var.device_bytes > 0 ? 1 : 0
  triggers_replace = [libvirt_volume.device[0].id]
  provisioner "local-exec" {
    # The path goes through the environment, never into the shell's text: a state_dir may hold quotes.
    command     = "dd if=/dev/urandom of=\"$VTB_DEVICE\" bs=1M count=${ceil(var.device_bytes / 1048576)} conv=notrunc,fsync status=none"
    environment = { VTB_DEVICE = libvirt_volume.device[0].id }
  }
}

output "pool" { value = libvirt_pool.this.name }
output "base_volume_id" { value = var.image.on_host ? var.image.rootfs : libvirt_volume.base[0].id }
output "kernel_volume_id" { value = var.image.on_host ? var.image.kernel : libvirt_volume.kernel[0].id }
output "initrd_volume_id" { value = var.image.on_host ? var.image.initrd : libvirt_volume.initrd[0].id }
output "device_volume_id" {
  value      = var.device_bytes > 0 ? libvirt_volume.device[0].id : null
  depends_on = [terraform_data.prefill]
}
