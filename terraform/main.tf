# The testbed: one storage pool with the guest image (and, by default, the host device file), an
# optional host RAID array or local Ceph cluster, and a fleet of VMs whose data disks the chosen
# backend carves from that one device (the file, the array, a block device the user named, or an
# RBD image in the cluster).
module "storage" {
  source       = "./modules/storage"
  prefix       = var.prefix
  pool_dir     = var.pool_dir
  image        = var.image
  device_bytes = var.device_bytes
}

module "raid" {
  source  = "./modules/host_step"
  create  = var.raid.create
  destroy = var.raid.destroy
}

module "ceph" {
  source  = "./modules/host_step"
  create  = var.ceph.create
  destroy = var.ceph.destroy
}

module "fleet" {
  source         = "./modules/fleet"
  prefix         = var.prefix
  pool           = module.storage.pool
  base_volume_id = module.storage.base_volume_id
  kernel         = module.storage.kernel_volume_id
  initrd         = module.storage.initrd_volume_id
  domain_type    = var.domain_type
  vcpus          = var.vcpus
  memory_mib     = var.memory_mib
  console_dir    = var.console_dir
  start_vms      = var.start_vms
  device_ready   = coalesce(module.raid.id, module.ceph.id, module.storage.device_volume_id, "block-device")
  backend        = var.backend
}

output "vms" {
  value = module.fleet.names
}
