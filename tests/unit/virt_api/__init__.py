"""tests/unit/virt_api."""
