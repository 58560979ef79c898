"""Managed state: Terraform's http backend served by Firstlume (spec: platform-api.md §2).

callers: who reads or writes (a person's API token, or a run phase's token for its own stack);
store: versions, kept and sealed, that never go backwards; locks: Terraform's lock protocol and
the admin's force-unlock; serials: what a plan planned against and the check before an apply.
"""
