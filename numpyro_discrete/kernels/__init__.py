"""numpyro ``MCMCKernel`` wrappers around the pure core: one base
(:mod:`~numpyro_discrete.kernels.base`), the path kernels LBP and ALBP
(:mod:`~numpyro_discrete.kernels.lbp`), the coordinate-wise kernels ACS and DMALA
(:mod:`~numpyro_discrete.kernels.acs`), and LBPGibbs for mixed models
(:mod:`~numpyro_discrete.kernels.lbp_gibbs`)."""
