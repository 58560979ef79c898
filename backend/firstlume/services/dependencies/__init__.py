"""Stack dependencies (adoption-api.md, section 9): which outputs a stack reads from which
stacks (config.py), their values as the plan's variables (inputs.py), and the runs an apply
that changed them starts (triggers.py)."""
