"""The checks of :class:`~numpyro_discrete.LBPGibbs`: its arguments (numpyro's
``DiscreteHMCGibbs`` and ``MixedHMC`` ones included) and the model it is given, each error
naming the argument or the sites and the fix."""

from collections.abc import Callable

import jax

from numpyro.infer.gibbs import subsample_plate_sizes
from numpyro.infer.hmc import HMC
from numpyro.infer.hmc_gibbs import HMCECS
from numpyro.infer.mcmc import MCMCKernel

from numpyro_discrete.kernels.arguments import is_integer
from numpyro_discrete.model.sites import ModelSites, model_sites

__all__ = ["check_arguments", "check_model_sites"]


def check_arguments(
    inner_kernel: HMC,
    discrete_kernel: MCMCKernel | str | None,
    num_discrete_steps: int,
    random_walk: bool,
    modified: bool,
    num_discrete_updates: int | None,
    num_starts: int,
) -> Callable:
    """The model of `inner_kernel`, once the arguments of ``LBPGibbs`` are checked."""
    _check_numpyro_arguments(discrete_kernel, random_walk, modified, num_discrete_updates)
    for name, value, meaning in (
        ("num_discrete_steps", num_discrete_steps, "moves of the discrete sites per step"),
        ("num_starts", num_starts, "starts each chain chooses from"),
    ):
        if not is_integer(value):
            raise TypeError(
                f"LBPGibbs: `{name}` must be a positive int, got {type(value).__name__}."
            )
        if value < 1:
            raise ValueError(f"LBPGibbs: `{name}` must be >= 1 ({meaning}), got {value}.")
    if isinstance(inner_kernel, HMCECS):
        raise ValueError(
            "LBPGibbs: `inner_kernel` is HMCECS, whose subsampled likelihood LBPGibbs "
            "does not support (its moves need the full likelihood). Use "
            "LBPGibbs(NUTS(model)) with the full data (no `subsample_size` in the "
            "model's plates), or sum out the discrete sites with "
            "`infer={'enumerate': 'parallel'}` and use HMCECS alone."
        )
    if not isinstance(inner_kernel, HMC):
        raise ValueError(
            f"LBPGibbs: `inner_kernel` must be numpyro's HMC or NUTS (it samples the "
            f"continuous sites), got {type(inner_kernel).__name__}; build it as "
            "LBPGibbs(NUTS(model))."
        )
    model = inner_kernel.model
    if model is None:
        raise ValueError(
            "LBPGibbs: `inner_kernel` was built from `potential_fn`; LBPGibbs needs a "
            "model to tell discrete sites from continuous ones. Build it as NUTS(model)."
        )
    if discrete_kernel is not None and discrete_kernel != "auto":
        name = type(discrete_kernel).__name__
        if not isinstance(discrete_kernel, MCMCKernel) or isinstance(discrete_kernel, HMC):
            raise ValueError(
                f"LBPGibbs: `discrete_kernel` must be 'auto' or a discrete MCMCKernel such as "
                f"LBP(model) or ALBP(model), got {name}."
            )
        if getattr(discrete_kernel, "model", None) is not model:
            raise ValueError(
                f"LBPGibbs: `discrete_kernel` ({name}) must be built on the same model "
                "callable as `inner_kernel`, e.g. "
                f"LBPGibbs(NUTS(model), discrete_kernel={name}(model))."
            )
    return model


def check_model_sites(
    model: Callable, rng_key: jax.Array, model_args: tuple, model_kwargs: dict
) -> ModelSites:
    """The model's sites, or errors that name the sites and the fix, before numpyro's
    generic ones: no discrete latent site, or subsampled data."""
    sites = model_sites(model, rng_key, model_args, model_kwargs)
    if not sites.discrete:
        raise ValueError(
            f"LBPGibbs found no discrete latent sites to sample (continuous latent sites: "
            f"{list(sites.continuous)}; sites marked `infer={{'enumerate': 'parallel'}}` "
            "are summed out, not sampled). Use NUTS(model) alone for this model."
        )
    subsampled = subsample_plate_sizes(sites.trace)
    if subsampled:
        raise ValueError(
            f"LBPGibbs: the model subsamples its data (plates {sorted(subsampled)} have a "
            "`subsample_size`), and LBPGibbs's moves need the full likelihood. Remove "
            "`subsample_size` from these plates, or sum out the discrete sites with "
            "`infer={'enumerate': 'parallel'}` and use numpyro's HMCECS(NUTS(model))."
        )
    return sites


def _check_numpyro_arguments(
    discrete_kernel: MCMCKernel | str | None,
    random_walk: bool,
    modified: bool,
    num_discrete_updates: int | None,
) -> None:
    """The arguments of numpyro's DiscreteHMCGibbs and MixedHMC: accepted where they mean
    what LBPGibbs does, refused with the alternative otherwise."""
    for name, value in (("random_walk", random_walk), ("modified", modified)):
        if not isinstance(value, bool):
            raise TypeError(f"LBPGibbs: `{name}` must be a bool, got {value!r}.")
    if random_walk:
        raise ValueError(
            "LBPGibbs: `random_walk=True` (DiscreteHMCGibbs's uniform proposals over a "
            "site's values) is not available: LBPGibbs's discrete moves are informed, "
            "locally balanced proposals. Drop `random_walk`, or keep numpyro's "
            "DiscreteHMCGibbs for uniform proposals."
        )
    if modified and discrete_kernel not in (None, "auto"):
        raise ValueError(
            f"LBPGibbs: `modified=True` selects ALBP as the discrete kernel (its moves "
            f"never propose a site's current value); with `discrete_kernel` given "
            f"({type(discrete_kernel).__name__}), drop `modified`."
        )
    if num_discrete_updates is not None:
        raise ValueError(
            f"LBPGibbs: `num_discrete_updates={num_discrete_updates!r}` (MixedHMC's one-site "
            "updates inside each HMC trajectory) has no LBPGibbs equivalent: each step "
            "moves the discrete sites, several at once, then runs the inner kernel. Drop "
            "it, or give `num_discrete_steps=k` for k discrete moves per step."
        )
