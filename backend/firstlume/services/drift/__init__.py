"""Drift schedules: the scheduler that queues drift runs at each due cron slot (schedule.py), and
the loop that runs it inside the control plane (loop.py)."""
