"""numpyro ``MCMCKernel`` wrappers around the pure core."""
