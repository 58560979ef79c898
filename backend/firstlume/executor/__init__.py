"""The executor: runs one phase of one run, talking to the control plane over HTTP only."""
