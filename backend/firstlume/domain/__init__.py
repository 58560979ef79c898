"""Pure domain logic: no I/O, no database, no network."""
