"""Numerical edge cases of the kernels inside numpyro: undefined potentials and gradients,
flat targets, path lengths beyond the number of coordinates, one-coordinate and zero-size
sites, float32 and float64 states (extreme local ratios of the core path kernel:
test_core_building_blocks.py). The tests that run a full MCMC beyond the first few are
marked slow (the fast suite's time budget)."""

import contextlib

import numpy as np
import pytest

import jax
from jax import random
import jax.numpy as jnp

import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC

from numpyro_discrete import ALBP, LBP


def _precision(x64):
    return jax.enable_x64(True) if x64 else contextlib.nullcontext()


def _mcmc(kernel, num_samples=300, num_warmup=0, **kwargs):
    return MCMC(
        kernel, num_warmup=num_warmup, num_samples=num_samples, progress_bar=False, **kwargs
    )


FIELD = jnp.array([1.0, 0.5, -0.2, 0.3, 0.4, -0.6])


def undefined_potential(z):
    """NaN at states with x2 = x3 = 1, +inf (zero probability) at states with
    sum(x) >= 4, and a gradient that is NaN in x0 and x1 wherever x0 = x1 (the value
    stays finite there)."""
    x = z["x"].astype(jnp.result_type(float))
    energy = -(x @ FIELD) + 0.0 * jnp.sqrt(jnp.abs(x[0] - x[1]))
    energy = jnp.where(jnp.sum(x) >= 4, jnp.inf, energy)
    return jnp.where((x[2] == 1) & (x[3] == 1), jnp.nan, energy)


@pytest.mark.parametrize(
    "weights, path_length",
    [("gradient", 1), pytest.param("exact", 3, marks=pytest.mark.slow)],
)
def test_undefined_proposals_are_rejected_and_never_enter_the_state(weights, path_length):
    """Proposals where the potential is NaN or +inf are rejected; NaN gradient entries
    give zero weight; no NaN reaches the samples, potential, local ratios or acceptance,
    and the chain still moves among the defined states."""
    mcmc = _mcmc(LBP(potential_fn=undefined_potential, path_length=path_length, weights=weights))
    mcmc.run(
        random.key(1),
        init_params={"x": jnp.zeros(6, jnp.int32)},
        extra_fields=("log_ratios", "potential_energy", "accept_prob"),
    )
    x = np.asarray(mcmc.get_samples()["x"])
    extra = mcmc.get_extra_fields()
    assert not np.any((x[:, 2] == 1) & (x[:, 3] == 1))
    assert not np.any(x.sum(1) >= 4)
    assert np.all(np.isfinite(extra["potential_energy"]))
    assert not np.any(np.isnan(extra["log_ratios"]))
    assert np.all(np.isfinite(extra["accept_prob"]))
    assert len({tuple(row) for row in x}) >= 5


@pytest.mark.parametrize("kernel_cls", [LBP, pytest.param(ALBP, marks=pytest.mark.slow)])
def test_flat_target_accepts_every_path(kernel_cls):
    """A constant potential: every weight equal (top-k over tied keys), every path is
    its own reverse's mirror, acceptance exactly 1 and every step moves R coordinates."""
    kwargs = {"path_length": 3} if kernel_cls is LBP else {"init_path_length": 3.0}
    mcmc = _mcmc(kernel_cls(potential_fn=lambda z: jnp.zeros(()), **kwargs), num_warmup=0)
    mcmc.run(
        random.key(2),
        init_params={"x": jnp.zeros(8, jnp.int32)},
        extra_fields=("accept_prob", "num_changed"),
    )
    extra = mcmc.get_extra_fields()
    np.testing.assert_array_equal(extra["accept_prob"], 1.0)
    np.testing.assert_array_equal(extra["num_changed"], 3)
    x = np.asarray(mcmc.get_samples()["x"])
    assert np.all(np.abs(np.diff(x, axis=0)).sum(1) == 3)


def three_bits():
    numpyro.sample("x", dist.Bernoulli(0.5).expand([3]))


@pytest.mark.slow
def test_albp_scale_is_clipped_to_the_number_of_coordinates():
    """`max_path_length` and `init_path_length` above N are clipped to N (LBP's fixed
    `path_length > N` is an error instead, see docs/errors.md): on a flat target the
    acceptance is 1, so the adaptation pushes R_t up to its bound, N = 3, and freezes it
    half a step below (a frozen scale above 1 is never an integer): paths of 2 or 3."""
    kernel = ALBP(three_bits, init_path_length=10.0, max_path_length=50)
    mcmc = _mcmc(kernel, num_warmup=30, num_samples=20)
    mcmc.run(random.key(3), extra_fields=("path_length", "num_changed"))
    np.testing.assert_array_equal(mcmc.get_extra_fields()["path_length"], 2.5)
    assert set(np.unique(mcmc.get_extra_fields()["num_changed"])) <= {0, 2, 3}


def one_bernoulli():
    numpyro.sample("b", dist.Bernoulli(0.3))


def one_categorical():
    numpyro.sample("c", dist.Categorical(jnp.array([0.2, 0.5, 0.3])))


def one_poisson():
    numpyro.sample("n", dist.Poisson(1.5))


@pytest.mark.slow
@pytest.mark.parametrize(
    "model, site, mean",
    [(one_bernoulli, "b", 0.3), (one_categorical, "c", 1.1), (one_poisson, "n", 1.5)],
    ids=["bernoulli", "categorical", "poisson"],
)
def test_single_coordinate_models(model, site, mean):
    mcmc = _mcmc(ALBP(model), num_warmup=200, num_samples=3000)
    mcmc.run(random.key(4), extra_fields=("path_length",))
    samples = mcmc.get_samples()[site]
    assert samples.shape == (3000,) and jnp.issubdtype(samples.dtype, jnp.integer)
    np.testing.assert_array_equal(mcmc.get_extra_fields()["path_length"], 1.0)
    assert abs(float(samples.mean()) - mean) < 0.15


def with_empty_site():
    numpyro.sample("empty", dist.Bernoulli(0.5).expand([0]))
    numpyro.sample("x", dist.Bernoulli(jnp.array([0.2, 0.8, 0.4])))


def test_zero_size_site_beside_others():
    """A site of shape (0,) adds no coordinates and comes out with shape (num_samples, 0);
    a model whose only discrete sites are empty is an error (docs/errors.md). One flip per
    step: on three independent coordinates ALBP's R climbs to 3, and flipping every
    coordinate at once mixes so slowly that 1000 draws say little about the means."""
    mcmc = _mcmc(LBP(with_empty_site, path_length=1), num_warmup=100, num_samples=2000)
    mcmc.run(random.key(5))
    samples = mcmc.get_samples()
    assert samples["empty"].shape == (2000, 0)
    np.testing.assert_allclose(samples["x"].mean(0), [0.2, 0.8, 0.4], atol=0.08)


def two_fair_bits():
    numpyro.sample("x", dist.Bernoulli(0.5).expand([2]))


def test_albp_frozen_at_an_even_bound_stays_ergodic():
    """On two fair bits every proposal is accepted, so ``R_t`` climbs to its bound ``N = 2``
    during warmup and stays there; a frozen ``R = 2`` would never change the parity of
    ``sum(x)``. The frozen scale is 1.5 instead, and all four states are visited equally."""
    mcmc = _mcmc(ALBP(two_fair_bits), num_warmup=100, num_samples=4000)
    mcmc.run(random.key(8), extra_fields=("path_length",))
    assert float(mcmc.get_extra_fields()["path_length"][0]) == 1.5
    x = np.asarray(mcmc.get_samples()["x"])
    frequencies = np.bincount(2 * x[:, 0] + x[:, 1], minlength=4) / len(x)
    np.testing.assert_allclose(frequencies, 0.25, atol=0.04)


def two_categoricals():
    numpyro.sample("c", dist.Categorical(jnp.array([0.6, 0.3, 0.1])).expand([2]))


@pytest.mark.slow
def test_categorical_only_model_with_a_wide_ordinal_window():
    """`ordinal_window` is irrelevant without ordinal sites; a window wider than the
    categorical candidate table used to crash while building the neighbourhood."""
    mcmc = _mcmc(LBP(two_categoricals, ordinal_window=3), num_samples=200)
    mcmc.run(random.key(6))
    assert set(np.unique(mcmc.get_samples()["c"])) == {0, 1, 2}


@pytest.mark.slow
@pytest.mark.parametrize("x64", [False, True], ids=["float32", "float64"])
def test_state_dtypes_follow_the_precision(x64):
    """Floats in the state follow JAX's precision; samples keep the model's integer
    dtype."""
    with _precision(x64):
        float_dtype = jnp.result_type(float)
        mcmc = _mcmc(ALBP(three_bits), num_warmup=5, num_samples=5)
        mcmc.run(random.key(7), extra_fields=("accept_prob", "path_length"))
        state = mcmc.last_state
        for value in (state.potential_energy, state.log_ratios, state.path_length):
            assert value.dtype == float_dtype
        assert mcmc.get_extra_fields()["accept_prob"].dtype == float_dtype
        # the dtype the model's Bernoulli draws have at this precision
        model_dtype = dist.Bernoulli(0.5).sample(random.key(0)).dtype
        assert mcmc.get_samples()["x"].dtype == model_dtype
