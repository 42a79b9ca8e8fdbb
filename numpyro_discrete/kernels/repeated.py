"""A kernel applied several times per step, as one block of a Gibbs sweep
(``LBPGibbs(..., num_discrete_steps=k)``)."""

from collections.abc import Callable, Mapping
from typing import Any

import jax
from jax import lax

from numpyro.infer.mcmc import MCMCKernel

__all__ = ["RepeatedKernel"]


class RepeatedKernel(MCMCKernel):
    """`kernel` applied `num_steps` times per :meth:`sample`, as one block of a Gibbs sweep.

    Its state is the wrapped kernel's state after the last move. The wrapped kernel is
    initialised with ``num_steps * num_warmup`` warmup steps, so that its own adaptation
    (ALBP's ``R``) runs over the whole warmup of the sweep and is frozen after it.
    """

    def __init__(self, kernel: MCMCKernel, num_steps: int) -> None:
        self.kernel = kernel
        self.num_steps = num_steps

    @property
    def model(self) -> Callable | None:
        return self.kernel.model

    @property
    def sample_field(self) -> str:
        return self.kernel.sample_field

    @property
    def default_fields(self) -> tuple[str, ...]:
        return self.kernel.default_fields

    def init(
        self,
        rng_key: jax.Array,
        num_warmup: int,
        init_params: Any,
        model_args: tuple,
        model_kwargs: Mapping[str, Any] | None,
    ) -> Any:
        return self.kernel.init(
            rng_key, self.num_steps * num_warmup, init_params, model_args, model_kwargs
        )

    def sample(self, state: Any, model_args: tuple, model_kwargs: Mapping[str, Any] | None) -> Any:
        return lax.fori_loop(
            0,
            self.num_steps,
            lambda _, s: self.kernel.sample(s, model_args, model_kwargs),
            state,
        )

    def refresh(self, state: Any, model_args: tuple, model_kwargs: Mapping[str, Any] | None) -> Any:
        return self.kernel.refresh(state, model_args, model_kwargs)

    def wrap_model(self, wrapper: Callable[[Callable], Callable]) -> "RepeatedKernel":
        return RepeatedKernel(self.kernel.wrap_model(wrapper), self.num_steps)

    def get_constrain_fn(self, model_args: tuple, model_kwargs: Mapping[str, Any] | None) -> Any:
        return self.kernel.get_constrain_fn(model_args, model_kwargs)

    def postprocess_fn(self, model_args: tuple, model_kwargs: Mapping[str, Any] | None) -> Any:
        return self.kernel.postprocess_fn(model_args, model_kwargs)

    def get_diagnostics_str(self, state: Any) -> str:
        return self.kernel.get_diagnostics_str(state)
