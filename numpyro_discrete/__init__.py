"""Fast MCMC for the discrete latent variables of NumPyro models: locally balanced
proposals with gradients, multi-site path moves, adaptive path lengths, chromatic Gibbs
and exact chain-block Gibbs on the structure read from the model."""

from numpyro_discrete.diagnostics import Diagnosis, SiteDiagnosis, diagnose
from numpyro_discrete.kernels.acs import ACS, ACSState
from numpyro_discrete.kernels.auto import AutoDiscrete
from numpyro_discrete.kernels.block_gibbs import BlockGibbs, BlockGibbsState
from numpyro_discrete.kernels.chromatic import ChromaticGibbs, ChromaticGibbsState
from numpyro_discrete.kernels.collapsed import CollapsedDraw, CollapsedDrawState
from numpyro_discrete.kernels.dmala import DMALA, DMALAState
from numpyro_discrete.kernels.lbp import ALBP, LBP, ALBPState, LBPState
from numpyro_discrete.kernels.lbp_gibbs import LBPGibbs, LBPGibbsState
from numpyro_discrete.kernels.loop_checks import enable_loop_checks, loop_checks_enabled
from numpyro_discrete.model.errors import ModelError
from numpyro_discrete.model.layout import SiteSupport, discrete_sites

__all__ = [
    "ACS",
    "ACSState",
    "ALBP",
    "ALBPState",
    "AutoDiscrete",
    "BlockGibbs",
    "BlockGibbsState",
    "ChromaticGibbs",
    "ChromaticGibbsState",
    "CollapsedDraw",
    "CollapsedDrawState",
    "DMALA",
    "DMALAState",
    "Diagnosis",
    "LBP",
    "LBPGibbs",
    "LBPGibbsState",
    "LBPState",
    "ModelError",
    "SiteDiagnosis",
    "SiteSupport",
    "diagnose",
    "discrete_sites",
    "enable_loop_checks",
    "loop_checks_enabled",
]
__version__ = "0.2.0"
