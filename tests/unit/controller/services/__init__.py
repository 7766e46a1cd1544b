"""tests/unit/controller/services."""
