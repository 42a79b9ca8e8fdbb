"""The state of :class:`~numpyro_discrete.LBPGibbs`: numpyro's ``GibbsState`` with
properties that reach the discrete kernel's and the inner kernel's fields."""

from typing import Any

import jax
import jax.numpy as jnp

from numpyro.infer.gibbs import GibbsState
from numpyro.infer.hmc import HMCState

__all__ = ["LBPGibbsState"]


class LBPGibbsState(GibbsState):
    """
    State of :class:`LBPGibbs`: numpyro's :class:`~numpyro.infer.gibbs.GibbsState` with two
    blocks, the discrete kernel's state first and the inner HMC/NUTS state second; one block,
    the discrete kernel's state, for a model without continuous latent sites.

    - **z** - dict of the current values of all latent sites: discrete sites as the model
      draws them (integers), continuous sites in the inner kernel's unconstrained space
      (``MCMC.get_samples`` returns them constrained).
    - **block_states** - ``(discrete_state, hmc_state)``.
    - **rng_key** - random key for the next step.

    Properties, usable as ``extra_fields`` of :meth:`~numpyro.infer.MCMC.run`:

    - **discrete_state** - the discrete kernel's state (``ALBPState`` for ``ALBP``), so
      ``"discrete_state.<field>"`` reaches any of its fields.
    - **hmc_state** - the inner kernel's :data:`~numpyro.infer.hmc.HMCState`, so
      ``"hmc_state.<field>"`` reaches any of its fields, e.g. ``"hmc_state.accept_prob"``,
      ``"hmc_state.num_steps"``, ``"hmc_state.adapt_state.step_size"``; a ``ValueError``
      for a model without continuous sites (no inner kernel runs).
    - **accept_prob**, **mean_accept_prob**, **path_length**, **num_changed** - shortcuts to
      the fields of the same names of the *discrete* state (the names of the standalone
      kernels); a shortcut the discrete kernel's state lacks (``path_length`` of
      :class:`~numpyro_discrete.ACS`) raises a ``ValueError`` naming the fields it has.
    - **diverging** - shortcut to ``hmc_state.diverging`` (collected by default, as for
      ``NUTS``, so that :meth:`~numpyro.infer.MCMC.print_summary` counts divergences);
      ``False`` without continuous sites (no HMC trajectory, no divergence).
    """

    __slots__ = ()

    @property
    def discrete_state(self) -> Any:
        return self.block_states[0]

    @property
    def hmc_state(self) -> HMCState:
        if len(self.block_states) == 1:
            # not an AttributeError (see `_discrete_field`)
            raise ValueError(
                "LBPGibbsState.hmc_state: the model has no continuous latent sites, so "
                "LBPGibbs runs its discrete kernel alone and no inner-kernel state exists; "
                "collect the discrete kernel's fields instead, e.g. 'accept_prob' or "
                "'discrete_state.<field>'."
            )
        return self.block_states[1]

    def _discrete_field(self, name: str) -> jax.Array:
        state = self.discrete_state
        if name not in state._fields:
            # not an AttributeError: numpyro's field getter catches those and falls back to
            # indexing, which would replace this message with an unrelated TypeError
            fields = [f for f in state._fields if f not in ("z", "rng_key")]
            raise ValueError(
                f"LBPGibbsState.{name}: the discrete kernel's state ({type(state).__name__}) "
                f"has no field `{name}`; collect one of its own fields instead, e.g. "
                f"{['discrete_state.' + f for f in fields]}."
            )
        return getattr(state, name)

    @property
    def accept_prob(self) -> jax.Array:
        return self._discrete_field("accept_prob")

    @property
    def mean_accept_prob(self) -> jax.Array:
        return self._discrete_field("mean_accept_prob")

    @property
    def path_length(self) -> jax.Array:
        return self._discrete_field("path_length")

    @property
    def num_changed(self) -> jax.Array:
        return self._discrete_field("num_changed")

    @property
    def diverging(self) -> jax.Array:
        if len(self.block_states) == 1:
            return jnp.zeros(jnp.shape(self.rng_key), bool)
        return self.hmc_state.diverging
