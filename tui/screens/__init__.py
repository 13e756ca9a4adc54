"""The dashboard's screens: one module each, switched with the keys 1-6 (see tui.app)."""
