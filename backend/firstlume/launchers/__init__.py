"""Launchers start one executor per run phase: a local subprocess or a Kubernetes Job."""
