"""Who may do what: roles, the permission table, members, tokens and approvers (platform-api §5)."""
