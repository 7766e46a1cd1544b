"""virtctl_py package."""
