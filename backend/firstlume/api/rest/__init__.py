"""REST compatibility routes of spec/rest-api.md. Thin: parse, call a use case, serialize."""
