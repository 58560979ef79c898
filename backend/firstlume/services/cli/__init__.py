"""The Terraform CLI as a client (a `cloud` block): workspaces are stacks, configuration versions
are uploaded code, and CLI runs are Firstlume runs that plan that code."""
