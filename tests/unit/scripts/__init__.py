"""tests/unit/scripts."""
