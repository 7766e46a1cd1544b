"""tests/unit/controller/node."""
