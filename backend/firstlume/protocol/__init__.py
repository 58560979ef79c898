"""Messages shared by the control plane, its executors and its processes."""
