"""Every private numpyro name this package relies on, in one place; everything else it uses
from numpyro is public API. ``tests/test_numpyro_internals.py`` fails loudly, naming the
entry, when a numpyro release changes one of them.

- :func:`prepare_model_for_potential`: ``numpyro.infer.util._prepare_model_for_potential``,
  the preparation numpyro's ``HMC`` and ``DiscreteGibbs`` apply to a model before building
  its potential (``param`` values substituted, a default key, plate checks, enumeration).
  Using it keeps our log density equal to numpyro's for the same model.
- :data:`SAMPLE_FN_ATTRIBUTE`: ``MCMC`` calls a kernel's ``init`` again (after pickling, or
  for a run from ``post_warmup_state``) when the kernel's ``_sample_fn`` is ``None``; our
  kernels keep that attribute for it.
- :func:`use_gibbs_state_class`: numpyro's ``Gibbs`` builds its state from the class
  attribute ``_state_cls``; :class:`~numpyro_discrete.LBPGibbs` sets its own state class,
  whose properties reach the fields of both blocks.
- :func:`set_block_kernel`: numpyro's ``Gibbs`` holds its block kernels (each rebound to
  the conditioned model) in ``_kernels``; :class:`~numpyro_discrete.LBPGibbs` sets its inner
  block at ``init``, on the model with the discrete sites summed out where they can be.
- :func:`run_arguments`: ``MCMC`` keeps the model arguments of its last ``run`` in
  ``_args`` and ``_kwargs``; :func:`~numpyro_discrete.diagnose` evaluates the model's log
  joint at each draw with them.
"""

from numpyro.infer.gibbs import Gibbs, GibbsState
from numpyro.infer.mcmc import MCMC, MCMCKernel
from numpyro.infer.util import _prepare_model_for_potential

__all__ = [
    "SAMPLE_FN_ATTRIBUTE",
    "prepare_model_for_potential",
    "run_arguments",
    "set_block_kernel",
    "use_gibbs_state_class",
]

prepare_model_for_potential = _prepare_model_for_potential

SAMPLE_FN_ATTRIBUTE = "_sample_fn"

_GIBBS_STATE_CLASS_ATTRIBUTE = "_state_cls"


def use_gibbs_state_class(gibbs_class: type[Gibbs], state_class: type[GibbsState]) -> None:
    """Make the subclass `gibbs_class` of numpyro's ``Gibbs`` build `state_class` states."""
    if not hasattr(Gibbs, _GIBBS_STATE_CLASS_ATTRIBUTE):
        raise RuntimeError(
            "numpyro's Gibbs no longer has the class attribute `_state_cls`, which LBPGibbs "
            "sets to build its own state; this numpyro version is not supported."
        )
    setattr(gibbs_class, _GIBBS_STATE_CLASS_ATTRIBUTE, state_class)


_GIBBS_KERNELS_ATTRIBUTE = "_kernels"


def set_block_kernel(gibbs: Gibbs, index: int, kernel: MCMCKernel) -> None:
    """Make `kernel` (already on the model the block should run) block `index` of `gibbs`."""
    kernels = getattr(gibbs, _GIBBS_KERNELS_ATTRIBUTE, None)
    if not isinstance(kernels, tuple):
        raise RuntimeError(
            "numpyro's Gibbs no longer holds its block kernels in the tuple `_kernels`, which "
            "LBPGibbs sets at `init`; this numpyro version is not supported."
        )
    setattr(gibbs, _GIBBS_KERNELS_ATTRIBUTE, kernels[:index] + (kernel,) + kernels[index + 1 :])


def run_arguments(mcmc: MCMC) -> tuple[tuple, dict] | None:
    """The model arguments of `mcmc`'s last ``run``; ``None`` where numpyro no longer keeps
    them (the caller then does without)."""
    args, kwargs = getattr(mcmc, "_args", None), getattr(mcmc, "_kwargs", None)
    if not isinstance(args, tuple) or not isinstance(kwargs, dict):
        return None
    return args, kwargs
