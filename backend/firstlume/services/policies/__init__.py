"""Policies as code (adoption-api.md section 8): Rego modules stored per organization, compiled
when saved, evaluated at the end of every plan by an engine behind one small interface."""
