"""shared package."""
