"""The subset of the HCP Terraform API (`/api/v2`, JSON:API) the Terraform CLI uses with a
`cloud` block, mapped onto Firstlume's stacks, runs, approvals and managed state."""
