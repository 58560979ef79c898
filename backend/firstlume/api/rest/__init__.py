"""REST compatibility routes of docs/rest-api.md. Thin: parse, call a use case, serialize."""
