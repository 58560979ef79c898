"""The scheduler loop: dispatch queued phases, watch executors, time out heartbeats."""
