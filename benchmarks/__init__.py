"""Benchmarks of numpyro-discrete against numpyro's samplers (not part of the package)."""
