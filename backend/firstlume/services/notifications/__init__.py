"""Notifications: destinations (destinations.py), the deliveries written with each status change
(enqueue.py), their bodies (payloads.py), where they may go (addresses.py), and the sender that
posts them after commit, from any replica, with retries (sender.py)."""
