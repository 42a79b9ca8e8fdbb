"""Reductions along a short last axis (a coordinate's few candidates, a term's few
coordinates), written as operations on its columns.

XLA's CPU backend (jaxlib >= 0.9, its YNNPACK reduction fusions) reduces a ``(20000, 2)``
array along its rows about 20 times slower than the same two columns added, and
``jax.nn.log_softmax`` along such rows about 40 times slower (measured on 2 cores, jax
0.10.2: 231 against 12 us, and 527 us). A chromatic sweep of a 200 x 200 lattice spent most of
its time in such reductions. Axes longer than :data:`MAX_COLUMNS` keep ``jax.numpy``'s
reductions, whose program does not grow with the axis.

Example:

.. doctest::

    >>> import jax, jax.numpy as jnp
    >>> from numpyro_discrete.core.rows import row_log_softmax, row_sum
    >>> a = jnp.array([[0.0, 1.0, 2.0], [-jnp.inf, 0.0, -jnp.inf]])
    >>> row_sum(a[:1]).tolist()
    [3.0]
    >>> bool(jnp.allclose(row_log_softmax(a), jax.nn.log_softmax(a, axis=-1)))
    True
"""

import functools
import operator

import jax
import jax.numpy as jnp
from jax.scipy.special import logsumexp

__all__ = [
    "MAX_COLUMNS",
    "row_argmax",
    "row_inverse_cdf",
    "row_log_softmax",
    "row_logsumexp",
    "row_max",
    "row_sum",
    "row_take",
]

#: widths up to which a row reduction is written out column by column
MAX_COLUMNS = 16


def _columns(a: jax.Array | list[jax.Array]) -> list[jax.Array]:
    """The columns of `a`, or `a` itself where it is already a list of them."""
    if isinstance(a, list):
        return a
    return [a[..., k] for k in range(a.shape[-1])]


def row_sum(a: jax.Array) -> jax.Array:
    """``jnp.sum(a, axis=-1)``."""
    if a.shape[-1] == 0 or a.shape[-1] > MAX_COLUMNS:
        return jnp.sum(a, axis=-1)
    return functools.reduce(operator.add, _columns(a))


def row_max(a: jax.Array | list[jax.Array]) -> jax.Array:
    """``jnp.max(a, axis=-1)`` of a non-empty last axis (or of a list of columns)."""
    if not isinstance(a, list) and a.shape[-1] > MAX_COLUMNS:
        return jnp.max(a, axis=-1)
    return functools.reduce(jnp.maximum, _columns(a))


def row_argmax(a: jax.Array) -> jax.Array:
    """``jnp.argmax(a, axis=-1)`` as int32: the first maximal column of each row without
    NaN."""
    if a.shape[-1] > MAX_COLUMNS:
        return jnp.argmax(a, axis=-1).astype(jnp.int32)
    columns = _columns(a)
    best, index = columns[0], jnp.zeros(columns[0].shape, jnp.int32)
    for k in range(1, len(columns)):
        better = columns[k] > best
        best = jnp.where(better, columns[k], best)
        index = jnp.where(better, k, index)
    return index


def row_logsumexp(a: jax.Array) -> jax.Array:
    """``logsumexp(a, axis=-1)``; ``-inf`` for a row of ``-inf``."""
    if a.shape[-1] > MAX_COLUMNS:
        return logsumexp(a, axis=-1)
    top = row_max(a)
    # a row of -inf: shift by 0, so that its sum is 0 and its log -inf (no NaN)
    shift = jnp.where(jnp.isfinite(top), top, 0.0)
    return shift + jnp.log(row_sum(jnp.exp(a - shift[..., None])))


def row_log_softmax(a: jax.Array) -> jax.Array:
    """``jax.nn.log_softmax(a, axis=-1)``."""
    return a - row_logsumexp(a)[..., None]


def row_inverse_cdf(probs: jax.Array | list[jax.Array], uniforms: jax.Array) -> jax.Array:
    """Per row of unnormalised `probs` (or a list of their columns), the slot ``k`` with
    ``cdf[k - 1] <= u * total < cdf[k]``: a running sum over the slots (a cumulative sum is
    a slow reduce-window on CPU)."""
    columns = _columns(probs)
    threshold = uniforms * functools.reduce(operator.add, columns)
    running = jnp.zeros_like(threshold)
    slot = jnp.zeros(threshold.shape, jnp.int32)
    for column in columns[:-1]:
        running = running + column
        slot = slot + (running <= threshold)
    return slot


def row_take(a: jax.Array | list[jax.Array], slot: jax.Array) -> jax.Array:
    """``a[..., slot]`` per row (``take_along_axis``) as a chain of selects over the
    columns (or over a list of them); `slot` has `a`'s shape without its last axis."""
    if not isinstance(a, list) and a.shape[-1] > MAX_COLUMNS:
        return jnp.take_along_axis(a, slot[..., None], axis=-1)[..., 0]
    columns = _columns(a)
    value = columns[0]
    for k in range(1, len(columns)):
        value = jnp.where(slot == k, columns[k], value)
    return value
