"""handler package."""
