# A host software-RAID array. The provider has no mdadm resource, so the harness does the work
# (`harness host raid create|destroy PLAN`, idempotent, with its safety checks) and Terraform
# owns the lifecycle: a changed plan replaces the array, and destroy stops it and zeroes only
# the superblocks it wrote.
variable "create" {
  description = "Command that creates the array; empty = no array."
  type        = string
}
variable "destroy" {
  description = "Command that stops the array and zeroes its superblocks."
  type        = string
}

resource "terraform_data" "array" {
  count            = var.create == "" ? 0 : 1
  input            = { create = var.create, destroy = var.destroy }
  triggers_replace = [var.create]
  provisioner "local-exec" {
    command = self.input.create
  }
  provisioner "local-exec" {
    when    = destroy
    command = self.input.destroy
  }
}

output "id" {
  value = var.create == "" ? null : terraform_data.array[0].id
}
