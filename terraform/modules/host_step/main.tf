# Something the host needs under the fleet that the provider has no resource for: a software-RAID
# array, a Ceph cluster. The harness does the work (`python -m harness.resources raid|ceph create|destroy PLAN`,
# idempotent, with its safety checks) and Terraform owns the lifecycle: a changed plan (a new
# plan file) replaces it, and destroy undoes only what its plan made.
variable "create" {
  description = "Command that makes it; empty = nothing to make."
  type        = string
}
variable "destroy" {
  description = "Command that undoes it."
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
