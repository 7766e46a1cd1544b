"""tests/unit/controller/migration."""
