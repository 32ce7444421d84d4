"""Examples built on fs-search's public fronts (not installed with the package)."""
