"""Git-driven runs: webhooks and polling find new commits; pushes.py decides what they start."""
