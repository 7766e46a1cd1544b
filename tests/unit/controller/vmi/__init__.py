"""tests/unit/controller/vmi."""
