"""Fast MCMC for the discrete latent variables of NumPyro models: locally balanced
proposals with gradients, multi-site path moves, and adaptive path lengths."""

from numpyro_discrete.kernels.lbp import ALBP, LBP, LBPState

__all__ = ["ALBP", "LBP", "LBPState"]
__version__ = "0.1.0"
