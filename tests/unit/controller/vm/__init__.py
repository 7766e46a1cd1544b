"""tests/unit/controller/vm."""
