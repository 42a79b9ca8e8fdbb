"""numpyro ``MCMCKernel`` wrappers around the pure core:

- one base, :mod:`~numpyro_discrete.kernels.base`;
- the path kernels LBP and ALBP (:mod:`~numpyro_discrete.kernels.lbp`), sharing
  :mod:`~numpyro_discrete.kernels.path_kernel`;
- the coordinate-wise kernels ACS and DMALA (:mod:`~numpyro_discrete.kernels.acs`,
  :mod:`~numpyro_discrete.kernels.dmala`), sharing
  :mod:`~numpyro_discrete.kernels.coordinatewise`;
- the Gibbs kernels ChromaticGibbs and BlockGibbs (:mod:`~numpyro_discrete.kernels.chromatic`,
  :mod:`~numpyro_discrete.kernels.block_gibbs`);
- LBPGibbs for mixed models (:mod:`~numpyro_discrete.kernels.lbp_gibbs`), its state and
  checks beside it, and the discrete kernel it chooses (:mod:`~numpyro_discrete.kernels.auto`)."""
