"""The log-normaliser of a chain, differentiable in its potentials, for a sampler that
moves continuous sites with the chain summed out (``ALGORITHMS.md``, "Chain blocks"; the
forward algorithm, Rabiner 1989). Pure JAX, with the chain's conventions of
:mod:`~numpyro_discrete.core.chain_block` (``unary (..., L, M)``, ``pairwise (..., L - 1,
M, M)``, ``-inf`` for an impossible value or pair, leading axes a batch of chains).

Its gradient is the chain's marginals: ``d log Z / d phi_i(v) = p(x_i = v)`` and ``d log Z /
d psi_i(u, v) = p(x_i = u, x_{i+1} = v)`` (forward-backward). Reverse-mode differentiation
of the filter's ``lax.scan`` stores every step and runs the loop again backwards, in log
space: at ``L = 1000, M = 4`` on a CPU, ``value_and_grad`` took 1.5-1.75 ms. The rule here
runs the filter in probability space and one backward recursion for the marginals, like
the filter rescaled at each step and run again in log space where it lost mass to
underflow.

.. doctest::

    >>> import jax, jax.numpy as jnp
    >>> from numpyro_discrete.core.chain_marginal import log_normaliser
    >>> unary = jnp.zeros((3, 2))
    >>> pairwise = jnp.log(jnp.array([[3.0, 1.0], [1.0, 3.0]])) * jnp.ones((2, 1, 1))
    >>> float(log_normaliser(unary, pairwise)) == float(jnp.log(32.0))
    True
    >>> marginals = jax.grad(log_normaliser)(unary, pairwise)  # p(x_i = v)
    >>> bool(jnp.allclose(marginals, 0.5))
    True
"""

import jax
from jax import lax
import jax.numpy as jnp

from numpyro_discrete.core.chain_block import (
    _batched,
    _finite_or_zero,
    _log_normalise,
    _logsumexp,
    _scaled_kernels,
    _underflow_floor,
    forward_filter,
)
from numpyro_discrete.core.rows import row_sum
from numpyro_discrete.core.state import recompute_where

__all__ = ["chain_marginals", "log_normaliser"]


@jax.custom_vjp
def log_normaliser(unary: jax.Array, pairwise: jax.Array) -> jax.Array:
    """``log sum_x exp(sum_i phi_i(x_i) + sum_i psi_i(x_i, x_{i+1}))`` of each chain of the
    batch (``-inf`` when no state is possible), by the sequential filter of
    :func:`~numpyro_discrete.core.chain_block.forward_filter`; its gradient is
    :func:`chain_marginals` (zero for a chain of no possible state)."""
    return forward_filter(unary, pairwise, parallel=False)[1]


def _log_normaliser_forward(unary: jax.Array, pairwise: jax.Array) -> tuple:
    log_alphas, log_z = forward_filter(unary, pairwise, parallel=False)
    return log_z, (unary, pairwise, log_alphas, log_z)


def _log_normaliser_backward(residuals: tuple, cotangent: jax.Array) -> tuple:
    unary, pairwise, log_alphas, log_z = residuals
    single, pair = chain_marginals(unary, pairwise, log_alphas)
    possible = (log_z > -jnp.inf)[..., None]
    weight = jnp.where(possible, cotangent[..., None], 0.0)
    return weight[..., None] * single, weight[..., None, None] * pair


log_normaliser.defvjp(_log_normaliser_forward, _log_normaliser_backward)


def chain_marginals(
    unary: jax.Array, pairwise: jax.Array, log_alphas: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """``(p(x_i = v), p(x_i = u, x_{i+1} = v))``, shapes ``(..., L, M)`` and ``(..., L - 1,
    M, M)``, from the filter's `log_alphas` and a backward recursion: ``p(x_i = u, x_{i+1} =
    v) ∝ alpha_i(u) exp(psi_i(u, v) + phi_{i+1}(v)) beta_{i+1}(v)``, ``beta_i(u) = sum_v
    exp(psi_i(u, v) + phi_{i+1}(v)) beta_{i+1}(v)`` (each rescaled: only ratios matter)."""
    log_betas = _backward_recursion(unary, pairwise)
    # the pair marginals in log space: vectorised over the chain, no underflow to fear
    joint = log_alphas[..., :-1, :, None] + pairwise + (unary + log_betas)[..., 1:, None, :]
    flat = joint.reshape(*joint.shape[:-2], joint.shape[-2] * joint.shape[-1])
    pair = jnp.exp(_log_normalise(flat)).reshape(joint.shape)
    last = jnp.exp(log_alphas[..., -1:, :])  # the filter's last marginal is the smoothed one
    single = jnp.concatenate([jnp.sum(pair, axis=-1), last], axis=-2)
    return single, pair


def _backward_recursion(unary: jax.Array, pairwise: jax.Array) -> jax.Array:
    """``log beta_i`` (rescaled, ``(..., L, M)``): in probability space, and again in log
    space for a batch in which one total fell below the underflow floor."""
    kernels, _ = _scaled_kernels(unary, pairwise)
    num_values = unary.shape[-1]
    last = jnp.full(unary.shape[:-2] + (num_values,), 1.0 / num_values, unary.dtype)

    def step(beta: jax.Array, kernel: jax.Array) -> tuple:
        new = row_sum(kernel * beta[..., None, :])
        total = row_sum(new)
        new = new / jnp.where(total > 0, total, 1.0)[..., None]
        return new, (new, total)

    _, (rest, totals) = lax.scan(step, last, jnp.moveaxis(kernels, -3, 0), reverse=True)
    betas = jnp.concatenate([jnp.moveaxis(rest, 0, -2), last[..., None, :]], axis=-2)
    accurate = jnp.all(totals >= _underflow_floor(unary.dtype))
    return recompute_where(
        ~accurate, jnp.log(betas), _batched(_backward_log, unary.ndim - 2), unary, pairwise
    )


def _backward_log(unary: jax.Array, pairwise: jax.Array) -> jax.Array:
    """The backward recursion of one chain in log space (exact whatever the potentials)."""

    def step(log_beta: jax.Array, inputs: tuple) -> tuple:
        psi, phi = inputs
        new = _logsumexp(psi + (phi + log_beta)[None, :], axis=1)
        new = new - _finite_or_zero(_logsumexp(new, axis=0))
        return new, new

    last = jnp.zeros(unary.shape[-1], unary.dtype)
    _, rest = lax.scan(step, last, (pairwise, unary[1:]), reverse=True)
    return jnp.concatenate([rest, last[None]])
