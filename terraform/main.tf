# The default testbed: one storage pool with the guest image, and a fleet of VMs whose
# data disks are slices of one host device.
module "storage" {
  source   = "./modules/storage"
  prefix   = var.prefix
  pool_dir = var.pool_dir
  rootfs   = var.image.rootfs
  # A user-named block device is used in place; otherwise a file-backed device is created.
  device_bytes = var.data.is_block ? 0 : var.vms * var.data.slice_bytes
}

module "fleet" {
  source           = "./modules/fleet"
  prefix           = var.prefix
  pool             = module.storage.pool
  base_volume_id   = module.storage.base_volume_id
  device_volume_id = module.storage.device_volume_id
  kernel           = var.image.kernel
  initrd           = var.image.initrd
  domain_type      = var.domain_type
  vms              = var.vms
  vcpus            = var.vcpus
  memory_mib       = var.memory_mib
  console_dir      = var.console_dir
  data             = var.data
}

output "vms" {
  value = module.fleet.vms
}

output "device_path" {
  value = var.data.is_block ? var.data.path : module.storage.device_volume_id
}
