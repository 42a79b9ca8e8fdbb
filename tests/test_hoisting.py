"""The hoisted program (:mod:`numpyro_discrete.model.hoisting`) computes what the function
computes, under ``jit``, ``vmap``, ``grad`` and with traced values it closes over, and
leaves nothing for XLA to fold; a sampler on a model with a large constant gives the
draws it gives without hoisting."""

import numpy as np
import pytest

import jax
from jax import random
import jax.numpy as jnp

import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS

from numpyro_discrete import ChromaticGibbs, LBPGibbs
from numpyro_discrete.model import hoisting
from numpyro_discrete.model.hoisting import MIN_HOISTED_SIZE, hoist_constants

SIDE = 256  # a (256, 256, 2) field: 131,072 elements, hoisted
FIELD = jnp.asarray(np.random.default_rng(0).normal(size=(SIDE, SIDE, 2)), jnp.float32)


def _log_density(x, scale=1.0):
    """Constant parts at the top level and inside ``jit`` calls that mix them with `x`."""
    logits = FIELD * 0.5
    log_p = dist.Categorical(logits=logits).log_prob(x)
    mixed = jnp.where(x > 0, jnp.exp(FIELD[..., 0]), jnp.log1p(jnp.abs(FIELD[..., 1])))
    return jnp.sum(log_p + mixed * x) * scale


def test_the_hoisted_program_computes_the_function() -> None:
    x = jnp.asarray(np.random.default_rng(1).integers(0, 2, (SIDE, SIDE)), jnp.int32)
    hoisted = hoist_constants(_log_density)
    expected = _log_density(x)
    np.testing.assert_allclose(jax.jit(hoisted)(x), expected, rtol=1e-5)
    batch = jnp.stack([x, 1 - x])
    np.testing.assert_allclose(
        jax.jit(jax.vmap(hoisted))(batch), jax.vmap(_log_density)(batch), rtol=1e-5
    )
    # a traced value it closes over stays in the program (it is not a constant)
    scaled = jax.jit(lambda s: hoist_constants(lambda x: _log_density(x, s))(x))(2.0)
    np.testing.assert_allclose(scaled, 2.0 * expected, rtol=1e-5)
    # differentiated in x (as gradient ratios do)
    xf = x.astype(jnp.float32)

    def relaxed(x):
        return jnp.sum(x * jnp.exp(FIELD[..., 0]) + jnp.log(1.0 + FIELD[..., 1] ** 2) * x**2)

    np.testing.assert_allclose(
        jax.jit(jax.grad(hoist_constants(relaxed)))(xf), jax.grad(relaxed)(xf), rtol=1e-5
    )
    # concrete arguments: the function itself
    assert hoisted(x) == expected


def test_nothing_constant_is_left_to_fold() -> None:
    """The compiled program reads the hoisted values: no operation on the field (an
    exponential, a reduction of the logits) is left in it."""
    x = jnp.zeros((SIDE, SIDE), jnp.int32)
    plain = jax.jit(_log_density).lower(x).as_text()
    hoisted = jax.jit(hoist_constants(_log_density)).lower(x).as_text()
    assert "stablehlo.exponential" in plain and "stablehlo.exponential" not in hoisted


def test_small_constants_are_not_hoisted(monkeypatch) -> None:
    calls = []
    monkeypatch.setattr(hoisting, "_constant_part", lambda *a: calls.append(a) or [])
    small = jnp.ones(MIN_HOISTED_SIZE - 1)
    fn = hoist_constants(lambda x: jnp.sum(jnp.exp(small) * x))
    np.testing.assert_allclose(jax.jit(fn)(1.0), np.e * (MIN_HOISTED_SIZE - 1), rtol=1e-5)
    assert not calls


def test_a_program_is_hoisted_once_per_cache() -> None:
    cache: dict = {}
    x = jnp.zeros((SIDE, SIDE), jnp.int32)
    for _ in range(3):
        jax.jit(hoist_constants(_log_density, cache)).lower(x)
    assert len(cache) == 1


def _potts_model():
    """A 2-state Potts lattice whose field is a large constant the model closes over."""
    x = numpyro.sample("x", dist.Categorical(logits=FIELD))
    numpyro.factor("down", 0.4 * (x[1:, :] == x[:-1, :]))
    numpyro.factor("right", 0.4 * (x[:, 1:] == x[:, :-1]))


def test_a_kernels_terms_are_the_unhoisted_ones(monkeypatch) -> None:
    """The terms a kernel's step evaluates (compiled, the field hoisted) equal those of the
    program with the field folded by XLA, to rounding (the two evaluate the exponentials
    of the normalisation by different code), and the kernel samples."""
    kernel = ChromaticGibbs(_potts_model)
    mcmc = MCMC(kernel, num_warmup=3, num_samples=3, progress_bar=False)
    mcmc.run(random.key(0))
    target = kernel._target
    x = target.flatten({"x": mcmc.get_samples()["x"][-1]})
    hoisted = jax.jit(target.log_terms())(x)
    assert target._constant_parts, "the step hoisted nothing"
    monkeypatch.setattr(hoisting, "MIN_HOISTED_SIZE", 10**9)
    folded = jax.jit(target.log_terms())(x)
    np.testing.assert_allclose(hoisted, folded, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("chain_method", ["sequential", "vectorized", "parallel"])
def test_hoisted_targets_sample_under_every_chain_method(chain_method) -> None:
    """Two chains of the large-field model: the constant part is computed inside the trace
    of a ``vmap``-ed or ``pmap``-ed step as well, and the chains agree with the terms
    evaluated without a trace."""
    kernel = ChromaticGibbs(_potts_model)
    mcmc = MCMC(
        kernel,
        num_warmup=2,
        num_samples=2,
        num_chains=2,
        chain_method=chain_method,
        progress_bar=False,
    )
    mcmc.run(random.key(1))
    last = mcmc.last_state
    x = np.asarray(last.z["x"]).reshape(2, -1)
    log_density = kernel._target.log_density()
    expected = [float(log_density(jnp.asarray(row, jnp.int32))) for row in x]
    np.testing.assert_allclose(-np.asarray(last.potential_energy), expected, rtol=1e-5)


def test_a_mixed_model_hoists_beside_traced_continuous_sites() -> None:
    """Inside ``LBPGibbs`` the discrete block's density closes over NUTS's traced draws:
    the operations on the data alone are hoisted, those on the draws stay in the step, and
    a program that computes nothing from the data alone is left as it is."""
    num_points = MIN_HOISTED_SIZE
    rng = np.random.default_rng(2)
    log_scale = jnp.asarray(rng.normal(0.0, 0.1, num_points), jnp.float32)
    y = jnp.asarray(rng.normal(0.0, 1.0, num_points) + 2.0 * (rng.random(num_points) < 0.5))

    def model(y):
        locs = numpyro.sample("locs", dist.Normal(0.0, 3.0).expand([2]))
        with numpyro.plate("points", num_points):
            z = numpyro.sample("z", dist.Bernoulli(0.5))
            numpyro.sample("y", dist.Normal(locs[z], jnp.exp(log_scale)), obs=y)

    kernel = LBPGibbs(NUTS(model))
    mcmc = MCMC(kernel, num_warmup=2, num_samples=2, progress_bar=False)
    mcmc.run(random.key(3), y)
    samples = mcmc.get_samples()
    assert np.all(np.isfinite(samples["locs"])) and set(np.unique(samples["z"])) <= {0, 1}
    chosen = getattr(kernel.discrete_kernel, "chosen", kernel.discrete_kernel)
    parts = [part for _, part in chosen._target._constant_parts.values()]
    assert any(part is not None for part in parts), "nothing hoisted from the data"
