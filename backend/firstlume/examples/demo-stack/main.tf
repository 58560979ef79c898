# A demo stack that needs no cloud account and no provider download: only Terraform's built-in
# terraform_data resource. Change `greeting` or `replica_count` in config.yaml (or as a
# variable in Firstlume) and plan again to see updates, creates and deletes.

variable "greeting" {
  type    = string
  default = "hello"
}

variable "replica_count" {
  type    = number
  default = 2
}

variable "api_token" {
  type      = string
  default   = "demo-not-a-secret"
  sensitive = true
}

resource "terraform_data" "network" {
  input = {
    cidr = "10.0.0.0/16"
    name = "demo"
  }
}

resource "terraform_data" "database" {
  input            = { engine = "postgres", version = "15" }
  triggers_replace = [terraform_data.network.id]
}

resource "terraform_data" "app" {
  count = var.replica_count
  input = {
    greeting = var.greeting
    replica  = count.index
    token    = var.api_token
  }
}

output "greeting" {
  value = var.greeting
}
