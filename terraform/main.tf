# The default testbed: one storage pool with the guest image and the host device file, and a
# fleet of VMs whose data disks the chosen backend carves from that one device.
module "storage" {
  source       = "./modules/storage"
  prefix       = var.prefix
  pool_dir     = var.pool_dir
  rootfs       = var.image.rootfs
  device_bytes = var.device_bytes
}

module "fleet" {
  source         = "./modules/fleet"
  prefix         = var.prefix
  pool           = module.storage.pool
  base_volume_id = module.storage.base_volume_id
  kernel         = var.image.kernel
  initrd         = var.image.initrd
  domain_type    = var.domain_type
  vcpus          = var.vcpus
  memory_mib     = var.memory_mib
  console_dir    = var.console_dir
  device_ready   = coalesce(module.storage.device_volume_id, "block-device")
  backend        = var.backend
}

output "vms" {
  value = module.fleet.names
}
