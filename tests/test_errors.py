"""Every user error is raised early, names the site or argument, and says what to do."""

import re

import pytest

from jax import random
import jax.numpy as jnp

import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC

from numpyro_discrete import ALBP, LBP, SiteSupport


def _run(kernel, *args, init_params=None):
    mcmc = MCMC(kernel, num_warmup=2, num_samples=2, progress_bar=False)
    mcmc.run(random.key(0), *args, init_params=init_params)
    return mcmc


def continuous_model():
    numpyro.sample("w", dist.Normal(0.0, 1.0))


def mixed_model():
    z = numpyro.sample("z", dist.Bernoulli(0.5))
    numpyro.sample("w", dist.Normal(z, 1.0))


def multinomial_model():
    numpyro.sample("m", dist.Multinomial(4, jnp.ones(3) / 3))


def poisson_model():
    numpyro.sample("n", dist.Poisson(3.0).expand([2]))


def index_by_poisson_model():
    n = numpyro.sample("n", dist.Poisson(1.0))
    numpyro.sample("y", dist.Normal(jnp.arange(5.0)[n], 1.0), obs=0.3)


def binary_model():
    numpyro.sample("x", dist.Bernoulli(0.5).expand([3]))


def indexing_model():
    x = numpyro.sample("x", dist.Bernoulli(0.5))
    numpyro.sample("y", dist.Normal(jnp.array([-1.0, 1.0])[x], 1.0), obs=0.3)


def impossible_start_model():
    x = numpyro.sample("x", dist.Bernoulli(0.5).expand([3]))
    numpyro.factor("forbid_zero", jnp.where(jnp.sum(x) == 0, -jnp.inf, 0.0))


@pytest.mark.parametrize(
    "make_kernel, args, init_params, message",
    [
        (
            lambda: ALBP(continuous_model),
            (),
            None,
            "ALBP found no discrete latent sites in the model",
        ),
        (
            lambda: ALBP(mixed_model),
            (),
            None,
            "continuous latent sites 'w' (Normal). Sample them beside ALBP with numpyro's Gibbs",
        ),
        (
            lambda: LBP(multinomial_model),
            (),
            None,
            "Site 'm' (MultinomialProbs with support Multinomial()) is a multivariate "
            "discrete distribution (event shape (3,))",
        ),
        (
            lambda: LBP(poisson_model),
            (),
            {"n": jnp.array([1, -1])},
            "`init_params` has values outside the support of sites 'n' (ordinal[0, inf])",
        ),
        (
            lambda: LBP(index_by_poisson_model, weights="gradient"),
            (),
            None,
            "cannot be differentiated in the values of site 'n'",
        ),
        (
            lambda: LBP(binary_model, weights={"y": "exact"}),
            (),
            None,
            "`weights` names sites ['y'] that it does not sample; its sites are ['x']",
        ),
        (
            lambda: ALBP(
                potential_fn=lambda z: jnp.sum(z["x"]), supports={"y": SiteSupport.binary()}
            ),
            (),
            {"x": jnp.zeros(3, jnp.int32)},
            "`supports` names sites ['y'] that are not in `init_params`",
        ),
        (
            lambda: LBP(binary_model, num_flips=4),
            (),
            None,
            "`num_flips=4` exceeds the number of discrete coordinates (3)",
        ),
        (
            lambda: LBP(indexing_model, weights="gradient"),
            (),
            None,
            "cannot be differentiated in the values of site 'x'",
        ),
        (
            lambda: LBP(binary_model),
            (),
            {"y": jnp.zeros(3, jnp.int32)},
            "`init_params` has sites ['y'] that LBP does not sample",
        ),
        (
            lambda: LBP(binary_model),
            (),
            {"x": jnp.zeros(4, jnp.int32)},
            "`init_params['x']` has shape (4,), but site 'x' has shape (3,)",
        ),
        (
            lambda: LBP(impossible_start_model),
            (),
            {"x": jnp.zeros(3, jnp.int32)},
            "the potential energy is [inf] at the initial values of sites ['x']",
        ),
        (
            lambda: ALBP(potential_fn=lambda z: jnp.nan * jnp.sum(z["x"])),
            (),
            {"x": jnp.zeros(3, jnp.int32)},
            "the potential energy is [nan]",
        ),
        (
            lambda: ALBP(potential_fn=lambda z: jnp.sum(z["x"])),
            (),
            None,
            "ALBP with `potential_fn` needs `init_params`",
        ),
        (
            lambda: ALBP(potential_fn=lambda z: jnp.sum(z["x"])),
            (),
            {"x": jnp.array([0, 2, 1])},
            "`init_params` has values outside the support of sites 'x' (binary(2 values)). "
            "With `potential_fn`, ALBP treats sites as binary unless `supports` says otherwise",
        ),
    ],
)
def test_errors_at_init(make_kernel, args, init_params, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        _run(make_kernel(), *args, init_params=init_params)


@pytest.mark.parametrize(
    "make_kernel, message",
    [
        (lambda: LBP(), "LBP needs exactly one of `model` or `potential_fn`"),
        (
            lambda: LBP(binary_model, potential_fn=lambda z: 0.0),
            "LBP needs exactly one of `model` or `potential_fn`",
        ),
        (lambda: LBP(binary_model, num_flips=0), "`num_flips` must be an integer >= 1"),
        (lambda: LBP(binary_model, num_flips=2.5), "`num_flips` must be an integer >= 1"),
        (
            lambda: LBP(binary_model, balancing="gaussian"),
            "Unknown balancing function 'gaussian'; choose one of ['barker', 'sqrt']",
        ),
        (lambda: ALBP(binary_model, weights="hessian"), "unknown `weights='hessian'`"),
        (lambda: LBP(binary_model, weights={"x": "taylor"}), "unknown `weights={'x': 'taylor'}`"),
        (lambda: LBP(binary_model, ordinal_window=0), "`ordinal_window` must be an integer >= 1"),
        (
            lambda: LBP(binary_model, supports={"x": SiteSupport.binary()}),
            "`supports` is for `potential_fn` only",
        ),
        (
            lambda: LBP(potential_fn=lambda z: 0.0, supports={"x": 3}),
            "`supports` must map site names to `SiteSupport` objects",
        ),
        (lambda: SiteSupport.categorical(1), "needs an integer `num_categories >= 2`, got 1"),
        (lambda: SiteSupport.ordinal(0.5, 3), "needs integer bounds, got lower=0.5"),
        (lambda: SiteSupport.ordinal(3, 1), "`upper=1` is below `lower=3`"),
        (
            lambda: ALBP(binary_model, target_accept_prob=1.0),
            "`target_accept_prob` must lie in (0, 1), got 1.0",
        ),
        (
            lambda: ALBP(binary_model, target_accept_prob=-0.2),
            "`target_accept_prob` must lie in (0, 1)",
        ),
        (lambda: ALBP(binary_model, init_num_flips=0.5), "`init_num_flips` must be >= 1"),
        (
            lambda: ALBP(binary_model, max_num_flips=0),
            "`max_num_flips` must be None or an integer >= 1",
        ),
        (
            lambda: ALBP(binary_model, init_num_flips=5, max_num_flips=3),
            "`init_num_flips=5` exceeds `max_num_flips=3`",
        ),
    ],
)
def test_errors_at_construction(make_kernel, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        make_kernel()


def test_wrap_model_needs_a_model():
    with pytest.raises(ValueError, match="has no model to wrap"):
        LBP(potential_fn=lambda z: 0.0).wrap_model(lambda m: m)


def test_auto_weights_fall_back_to_exact_for_index_use():
    kernel = LBP(indexing_model)
    mcmc = _run(kernel)
    assert kernel.weights_mode == {"x": "exact"}
    assert mcmc.get_samples()["x"].shape == (2,)


def test_non_finite_start_is_caught_for_vectorized_chains():
    kernel = ALBP(potential_fn=lambda z: jnp.log(jnp.sum(z["x"]) - 1.0))
    mcmc = MCMC(
        kernel,
        num_warmup=2,
        num_samples=2,
        num_chains=2,
        chain_method="vectorized",
        progress_bar=False,
    )
    init = {"x": jnp.array([[1, 1, 1], [0, 0, 0]], jnp.int32)}
    with pytest.raises(ValueError, match=re.escape("potential energy is [0.693")):
        mcmc.run(random.key(0), init_params=init)


def test_even_path_length_on_binary_sites_warns():
    """LBP-2 flips exactly two bits per step: sum(x) mod 2 is invariant, so the warning is
    not a formality: a chain started at zeros only ever visits even-weight states."""
    with pytest.warns(UserWarning, match="never changes the parity"):
        mcmc = _run(LBP(binary_model, num_flips=2))
    mcmc = MCMC(LBP(binary_model, num_flips=2), num_warmup=0, num_samples=200, progress_bar=False)
    with pytest.warns(UserWarning):
        mcmc.run(random.key(1), init_params={"x": jnp.zeros(3, jnp.int32)})
    assert set(map(int, mcmc.get_samples()["x"].sum(1) % 2)) == {0}
