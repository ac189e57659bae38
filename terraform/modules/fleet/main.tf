# N direct-kernel-boot VMs with copy-on-write root disks. The data disk of each VM is rendered by
# the chosen backend (harness/backends/) and added through the XSLT hook, and the backend's host
# side (storage daemons, driver binding) is brought up and down by the harness around the domains.
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
variable "vcpus" { type = number }
variable "memory_mib" { type = number }
variable "console_dir" { type = string }
variable "start_vms" { type = bool }
variable "device_ready" {
  description = "Any value known once the host device exists and is prefilled (orders the backend after it)."
  type        = string
}
variable "backend" {
  description = "The backend's host-side commands and each VM's data-disk XML (see harness/backends)."
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

# Host side of the backend: runs before the domains start and after they are gone. A change of
# backend replaces it, and its destroy step runs the old backend's teardown.
resource "terraform_data" "backend_host" {
  input = {
    up           = var.backend.host_up
    down         = var.backend.host_down
    device_ready = var.device_ready
  }
  triggers_replace = [var.backend.host_up, var.device_ready]
  provisioner "local-exec" {
    command = self.input.up
  }
  provisioner "local-exec" {
    when    = destroy
    command = self.input.down
  }
}

# What the domains boot: another kernel (fleet.kernel) restarts them, where the provider would
# only redefine them in place and leave the running guests on the old kernel.
resource "terraform_data" "boot" {
  input = [var.kernel, var.initrd]
}

resource "libvirt_volume" "root" {
  count          = length(var.backend.vms)
  name           = "${var.backend.vms[count.index].name}-root.qcow2"
  pool           = var.pool
  base_volume_id = var.base_volume_id
  format         = "qcow2"
}

resource "libvirt_domain" "vm" {
  count      = length(var.backend.vms)
  depends_on = [terraform_data.backend_host]
  name       = var.backend.vms[count.index].name
  type       = var.domain_type
  vcpu       = var.vcpus
  memory     = var.memory_mib
  kernel     = var.kernel
  initrd     = var.initrd
  # start_vms = false: defined stopped, and the harness restores each domain from a booted template
  # (harness/fleet/vm_start.py; the provider still starts and destroys it once on create).
  running = var.start_vms
  # loglevel=4 (quiet's console level): every console byte is an exit to QEMU, about 0.7 ms in a
  # nested host; errors still reach the console, the rest stays in the guest's dmesg. Not the bare
  # word `quiet`: the provider drops an entry whose value is empty, and reads a "_" entry back as a
  # map of its own, so every apply would replace the domains. vtb-init mounts the root read-write.
  cmdline = [{
    "root"     = "LABEL=vtbroot"
    "console"  = "ttyS0"
    "init"     = "/sbin/vtb-init"
    "vtb.name" = var.backend.vms[count.index].name
    "loglevel" = "4"
  }]

  disk {
    volume_id = libvirt_volume.root[count.index].id
  }

  xml {
    xslt = templatefile("${path.module}/domain.xsl.tftpl", {
      devices_xml = var.backend.vms[count.index].devices_xml
      domain_xml  = var.backend.vms[count.index].domain_xml
      # an XML attribute (escaped, braces doubled: they are AVT syntax in XSLT) and an XML comment
      console = replace(replace(replace(replace(replace("${var.console_dir}/${var.backend.vms[count.index].name}.log",
      "&", "&amp;"), "<", "&lt;"), "\"", "&quot;"), "{", "{{"), "}", "}}")
      device = replace(var.device_ready, "--", "- -")
    })
  }

  lifecycle {
    # The provider reads back the data disk the XSLT added; the XSLT itself forces replacement.
    # `running` reads back true once the harness started the domain: that is not a change to make.
    ignore_changes = [disk, running]
    # A new host side (another backend, or the same one with other options) restarts its daemons:
    # a guest still connected to the old ones would lose its disk, and hold memory the new ones need.
    replace_triggered_by = [terraform_data.backend_host, terraform_data.boot]
  }
}

output "names" {
  value = libvirt_domain.vm[*].name
}
