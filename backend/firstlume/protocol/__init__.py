"""Messages that cross a process boundary, defined once for both sides."""
