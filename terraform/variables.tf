# Written by `harness testbed up` into <state_dir>/fleet.tfvars.json; see harness/testbed.py.
variable "libvirt_uri" {
  type    = string
  default = "qemu:///system"
}
variable "prefix" {
  description = "Name prefix of every resource (vtb-<fleet>); `harness gc` finds leftovers by it."
  type        = string
}
variable "pool_dir" { type = string }
variable "image" {
  description = "Guest image build output: rootfs (qcow2), kernel, initrd."
  type = object({
    rootfs = string
    kernel = string
    initrd = string
  })
}
variable "domain_type" {
  description = "libvirt domain type: kvm, or qemu (TCG) where the KVM probe failed."
  type        = string
  validation {
    condition     = contains(["kvm", "qemu"], var.domain_type)
    error_message = "domain_type must be kvm or qemu."
  }
}
variable "vms" {
  type = number
}
variable "vcpus" { type = number }
variable "memory_mib" { type = number }
variable "console_dir" { type = string }
variable "data" {
  description = "The host device every data disk is carved from (path is used only when is_block), and each VM's slice of it."
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
