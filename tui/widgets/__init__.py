"""Reusable dashboard widgets (each in its own module)."""
