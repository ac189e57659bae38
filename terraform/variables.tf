# Written by `harness testbed up` into <state_dir>/<fleet>/fleet.tfvars.json; see harness/fleet/testbed.py.
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
  description = "Guest image build output: rootfs (qcow2), kernel, initrd; on_host: already in the host's own pool."
  type = object({
    rootfs  = string
    kernel  = string
    initrd  = string
    on_host = bool
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
variable "vcpus" { type = number }
variable "memory_mib" { type = number }
variable "console_dir" { type = string }
variable "start_vms" {
  description = "Start the VMs on create (false: the harness starts them, restored from a saved template)."
  type        = bool
  default     = true
}
variable "device_bytes" {
  description = "Size of the host device file to create and prefill; 0 when the user named a block device."
  type        = number
}
variable "backend" {
  description = "Rendered by the harness's backend module: host-side commands and per-VM disk XML."
  type = object({
    host_up   = string
    host_down = string
    vms = list(object({
      name        = string
      devices_xml = string
      domain_xml  = string
    }))
  })
}
variable "raid" {
  description = "Commands that create and destroy the host RAID array; empty strings = no array."
  type = object({
    create  = string
    destroy = string
  })
  default = { create = "", destroy = "" }
}
variable "ceph" {
  description = "Commands that create and destroy the local Ceph cluster; empty strings = no cluster."
  type = object({
    create  = string
    destroy = string
  })
  default = { create = "", destroy = "" }
}
