"""Use cases and their transaction boundaries. The only code that changes a run's status."""
