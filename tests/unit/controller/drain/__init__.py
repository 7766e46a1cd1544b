"""tests/unit/controller/drain."""
