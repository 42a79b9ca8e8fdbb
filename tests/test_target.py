"""The model layer: :class:`~numpyro_discrete.model.target.DiscreteTarget` built from a
numpyro model or a ``potential_fn`` (which sites are sampled, their layout and supports, the
resolution of ``weights="auto"``, the flat log density and its local ratios, initial values,
deterministic sites), and the target a kernel builds at ``init``."""

import pickle

import numpy as np
import pytest

import jax
from jax import random
import jax.numpy as jnp

import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC
from numpyro.infer.util import log_density

from numpyro_discrete import ALBP, LBP, SiteSupport
from numpyro_discrete.core.neighbourhood import (
    UNBOUNDED,
    CoordinateSupports,
    SupportKind,
    coordinate_neighbourhood,
)
from numpyro_discrete.model.initial_values import initial_position
from numpyro_discrete.model.sites import model_sites
from numpyro_discrete.model.target import DiscreteTarget

LOCS = jnp.array([-1.0, 0.5, 2.0])


def model():
    """A binary site used smoothly, a categorical site used as an index, an ordinal site,
    a deterministic site and an observation."""
    b = numpyro.sample("b", dist.Bernoulli(0.3).expand([2]))
    c = numpyro.sample("c", dist.Categorical(jnp.array([0.2, 0.5, 0.3])))
    n = numpyro.sample("n", dist.Poisson(2.0))
    numpyro.deterministic("total", jnp.sum(b) + n)
    numpyro.sample("y", dist.Normal(LOCS[c] + 0.5 * n - b @ jnp.array([1.0, 2.0]), 1.0), obs=1.2)


def _target(**kwargs):
    return DiscreteTarget.from_model(model, random.key(0), (), {}, **kwargs)


def test_model_sites_sorts_the_latent_sites():
    def mixed(y):
        numpyro.sample("z", dist.Bernoulli(0.5).expand([2]))
        numpyro.sample("e", dist.Bernoulli(0.5), infer={"enumerate": "parallel"})
        mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
        numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)

    sites = model_sites(mixed, random.key(0), (0.5,), {})
    assert (sites.discrete, sites.enumerated, sites.continuous) == (("z",), ("e",), ("mu",))
    assert set(sites.trace) >= {"z", "e", "mu", "y"}


def test_layout_and_supports_from_the_model():
    target = _target()
    layout = target.layout
    assert layout.names == ("b", "c", "n")
    assert layout.shapes == ((2,), (), ())
    assert target.num_coords == layout.num_coords == 4
    kinds = [support.kind for support in layout.supports]
    assert kinds == [SupportKind.BINARY, SupportKind.CATEGORICAL, SupportKind.ORDINAL]
    assert all(isinstance(kind, SupportKind) for kind in kinds)
    supports = target.supports
    assert isinstance(supports, CoordinateSupports)
    np.testing.assert_array_equal(supports.kind, [0, 0, 1, 2])
    np.testing.assert_array_equal(supports.num_categories, [2, 2, 3, 0])
    np.testing.assert_array_equal(supports.lower, [0, 0, 0, 0])
    np.testing.assert_array_equal(supports.upper, [1, 1, 2, UNBOUNDED])
    # the neighbourhood is the one of these supports with the window given
    x = jnp.array([1, 0, 2, 3], jnp.int32)
    expected = coordinate_neighbourhood(supports, 2)
    neighbourhood = _target(ordinal_window=2).neighbourhood
    np.testing.assert_array_equal(neighbourhood.candidates(x), expected.candidates(x))
    np.testing.assert_array_equal(neighbourhood.valid(x), expected.valid(x))


@pytest.mark.parametrize(
    "weights, expected",
    [
        # categorical sites and sites used as an index: exact; `b`'s gradient ratios are
        # off by 0.5 and 2 nats at the initial state (the Gaussian likelihood's curvature,
        # median above the 1-nat limit): exact; `n`'s by 0.125: gradient
        ("auto", {"b": "exact", "c": "exact", "n": "gradient"}),
        ("exact", {"b": "exact", "c": "exact", "n": "exact"}),
        ({"n": "exact"}, {"b": "exact", "c": "exact", "n": "exact"}),
        ({"b": "gradient"}, {"b": "gradient", "c": "exact", "n": "gradient"}),
    ],
)
def test_weights_resolution(weights, expected):
    assert _target(weights=weights).weights_mode == expected


def test_auto_weights_fall_back_to_exact_for_index_use():
    def indexing_model():
        x = numpyro.sample("x", dist.Bernoulli(0.5))
        numpyro.sample("y", dist.Normal(jnp.array([-1.0, 1.0])[x], 1.0), obs=0.3)

    kernel = LBP(indexing_model)
    mcmc = MCMC(kernel, num_warmup=2, num_samples=2, progress_bar=False)
    mcmc.run(random.key(0))
    assert kernel.weights_mode == {"x": "exact"}
    assert mcmc.get_samples()["x"].shape == (2,)


def test_flatten_unflatten_and_log_density_match_numpyro(x64):
    target = _target()
    values = {"b": jnp.array([1, 0]), "c": jnp.array(2), "n": jnp.array(3)}
    flat = target.flatten(values)
    np.testing.assert_array_equal(flat, [1, 0, 2, 3])
    back = target.unflatten(flat)
    for name, value in values.items():
        np.testing.assert_array_equal(back[name], value)
        assert back[name].dtype == target.layout.dtypes[target.layout.names.index(name)]
    expected = log_density(model, (), {}, values)[0]
    np.testing.assert_allclose(target.log_density()(flat), expected, rtol=1e-12)


def test_local_ratios_follow_the_weights_mode(x64):
    """Exact rows are log-density differences at the candidates; gradient rows the
    first-order expansion; invalid candidates ``-inf``."""
    target = _target(weights={"b": "gradient", "n": "exact"})
    log_pi = jax.jit(target.log_density())
    x = jnp.array([1, 0, 2, 3], jnp.int32)
    # compiled, as in a step (op by op, the model's operations compile one by one)
    log_p, d = jax.jit(target.local_fn((), {}))(x)
    np.testing.assert_allclose(log_p, log_pi(x), rtol=1e-12)
    candidates = np.asarray(target.neighbourhood.candidates(x))
    valid = np.asarray(target.neighbourhood.valid(x))
    assert np.all(np.isneginf(np.asarray(d)[~valid]))
    for j in (2, 3):  # categorical (auto: exact) and ordinal (exact)
        for m in np.flatnonzero(valid[j]):
            neighbour = log_pi(x.at[j].set(candidates[j, m]))
            np.testing.assert_allclose(d[j, m], neighbour - log_p, rtol=1e-10)
    # the gradient rows of b: ``(c - x) * d log pi / d b`` of the float-relaxed density at x
    b = jnp.array([1.0, 0.0])

    def relaxed_b(b):
        values = {"b": b, "c": x[2], "n": x[3]}
        return log_density(model, (), {}, values)[0]

    gradient = np.asarray(jax.jit(jax.grad(relaxed_b))(b))
    expected = (candidates[:2, 0] - np.asarray(x[:2])) * gradient
    np.testing.assert_allclose(d[:2, 0], expected, rtol=1e-10)


def test_from_potential_layout_and_supports():
    def potential_fn(z):
        return -jnp.sum(z["s"]) - jnp.sum(z["x"])

    params = {"x": jnp.zeros((2, 3), jnp.int32), "s": jnp.ones((2,), jnp.int32)}
    target = DiscreteTarget.from_potential(
        potential_fn, params, batch_ndims=1, supports={"s": SiteSupport.categorical(4)}
    )
    assert target.layout.names == ("x", "s")
    assert target.layout.shapes == ((3,), ())
    np.testing.assert_array_equal(target.supports.kind, [0, 0, 0, 1])
    np.testing.assert_array_equal(target.supports.num_categories, [2, 2, 2, 4])
    assert target.weights_mode == {"x": "gradient", "s": "exact"}
    np.testing.assert_allclose(target.log_density()(jnp.array([1, 0, 1, 3])), 5.0)


def test_initial_position_and_deterministic_sites():
    target = _target()
    position = initial_position(target, random.key(1), {"c": jnp.array(1)}, (), {})
    assert position.shape == (4,) and int(position[2]) == 1
    assert np.all((position[:2] >= 0) & (position[:2] <= 1)) and int(position[3]) >= 0
    fn = target.postprocess_fn((), {})
    out = fn(target.unflatten(jnp.array([1, 1, 0, 4], jnp.int32)))
    assert int(out["total"]) == 6 and set(out) == {"b", "c", "n", "total"}


def test_kernel_builds_its_target_at_init():
    """A kernel's target (``kernel._target``, which replaced ``kernel._layout``) is built at
    ``init`` and dropped when the kernel is pickled."""
    kernel = ALBP(model)
    assert kernel._target is None and kernel.weights_mode is None
    kernel.init(random.key(0), 10, None, (), None)
    target = kernel._target
    assert isinstance(target, DiscreteTarget)
    assert target.layout.names == ("b", "c", "n")
    assert kernel.weights_mode == dict(target.weights_mode)
    assert pickle.loads(pickle.dumps(kernel))._target is None
