"""Developer tools: checks of the package itself, not measurements users read."""
