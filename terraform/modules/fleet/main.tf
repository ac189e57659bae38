# N direct-kernel-boot VMs. Each has a copy-on-write root disk and a raw data disk that is a
# slice (offset/size) of one shared host device, so all VMs contend for the same device.
terraform {
  required_providers {
    libvirt = { source = "dmacvicar/libvirt" }
  }
}
variable "prefix" { type = string }
variable "pool" { type = string }
variable "base_volume_id" { type = string }
variable "kernel" { type = string }
variable "initrd" { type = string }
variable "domain_type" { type = string }
variable "vms" { type = number }
variable "vcpus" { type = number }
variable "memory_mib" { type = number }
variable "console_dir" { type = string }
variable "device_volume_id" {
  description = "The host device as a libvirt volume; null when data.is_block names a block device."
  type        = string
}
variable "data" {
  type = object({
    path        = string
    is_block    = bool
    slice_bytes = number
    serial      = string
    cache       = string
    io          = string
    iothreads   = number
  })
}

locals {
  names = [for i in range(var.vms) : "${var.prefix}-vm${i}"]
}

resource "libvirt_volume" "root" {
  count          = var.vms
  name           = "${local.names[count.index]}-root.qcow2"
  pool           = var.pool
  base_volume_id = var.base_volume_id
  format         = "qcow2"
}

resource "libvirt_domain" "vm" {
  count  = var.vms
  name   = local.names[count.index]
  type   = var.domain_type
  vcpu   = var.vcpus
  memory = var.memory_mib
  kernel = var.kernel
  initrd = var.initrd
  cmdline = [{
    "root"     = "LABEL=vtbroot"
    "rw"       = ""
    "console"  = "ttyS0"
    "init"     = "/sbin/vtb-init"
    "vtb.name" = local.names[count.index]
    "quiet"    = ""
  }]

  disk {
    volume_id = libvirt_volume.root[count.index].id
  }
  disk {
    volume_id    = var.data.is_block ? null : var.device_volume_id
    block_device = var.data.is_block ? var.data.path : null
  }

  # What the provider cannot say: the data disk's slice, serial, cache/aio and iothreads,
  # a serial console to a file, and no graphics.
  xml {
    xslt = templatefile("${path.module}/domain.xsl.tftpl", {
      offset    = count.index * var.data.slice_bytes
      size      = var.data.slice_bytes
      serial    = var.data.serial
      cache     = var.data.cache
      io        = var.data.io
      iothreads = var.data.iothreads
      console   = "${var.console_dir}/${local.names[count.index]}.log"
    })
  }
}

output "vms" {
  value = [for i in range(var.vms) : {
    name         = local.names[i]
    slice_offset = i * var.data.slice_bytes
    slice_bytes  = var.data.slice_bytes
    serial       = var.data.serial
    console_log  = "${var.console_dir}/${local.names[i]}.log"
  }]
}
