"""The model's reading trace (``numpyro_discrete.model.sites.reading_trace``) runs as one
compiled program, reused by every later reading of the model: it must be the trace an
op-by-op reading gives, and fall back to that reading where it cannot be one program."""

import logging

import numpy as np
import pytest

import jax
from jax import random
import jax.numpy as jnp

import numpyro
import numpyro.distributions as dist
from numpyro.infer.gibbs import conditioned, latent_sample_sites, prototype_trace

from numpyro_discrete.gallery import GALLERY
from numpyro_discrete.model import bounds, sites
from numpyro_discrete.model.initial_values import initial_position
from numpyro_discrete.model.layout import discrete_sites
from numpyro_discrete.model.target import model_target


def _op_by_op(model, key, args, kwargs):
    with jax.ensure_compile_time_eval():
        return sites._read(model, key, args, kwargs)


def _assert_same_trace(compiled, eager):
    assert list(compiled) == list(eager)
    for name, site in eager.items():
        other = compiled[name]
        assert other["type"] == site["type"], name
        if site["type"] not in ("sample", "deterministic"):
            continue
        assert type(other.get("fn")) is type(site.get("fn")), name
        value, expected = np.asarray(other["value"]), np.asarray(site["value"])
        assert value.shape == expected.shape and value.dtype == expected.dtype, name
        if np.issubdtype(expected.dtype, np.floating):
            np.testing.assert_allclose(value, expected, rtol=1e-6, atol=1e-6, err_msg=name)
        else:
            np.testing.assert_array_equal(value, expected, err_msg=name)
        if site["type"] == "sample":
            support = other["fn"].support
            assert type(support) is type(site["fn"].support), name
            for bound in ("lower_bound", "upper_bound"):
                if hasattr(support, bound):
                    np.testing.assert_array_equal(
                        getattr(support, bound), getattr(site["fn"].support, bound)
                    )
            log_prob = other["fn"].log_prob(other["value"])
            np.testing.assert_allclose(
                log_prob, site["fn"].log_prob(site["value"]), rtol=1e-5, atol=1e-5, err_msg=name
            )


# the models with a scan, masks, a Poisson latent, ``to_event``; the others in the slow tier
FAST_GALLERY = ("hmm", "n_mixture", "sbm")


@pytest.mark.parametrize(
    "name",
    [n if n in FAST_GALLERY else pytest.param(n, marks=pytest.mark.slow) for n in GALLERY],
)
def test_the_compiled_reading_is_the_op_by_op_one(name):
    """Every gallery model, read as its kernels read it (conditioned, at its example size):
    same sites, distributions, supports, values and log-densities as op by op."""
    entry = GALLERY[name]
    data = entry.simulate(0, "exact")
    model = conditioned(entry.model)
    key = random.key(3)
    compiled = sites._compiled_reading(model, key, data.args, data.kwargs)
    assert compiled is not None
    _assert_same_trace(compiled, _op_by_op(model, key, data.args, data.kwargs))


def _compilations(caplog, fn):
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="jax"), jax.log_compiles():
        result = fn()
    messages = [r.getMessage() for r in caplog.records]
    return result, [m for m in messages if "XLA compilation of jit(read)" in m]


def mixture(y, num_components=2):
    weights = numpyro.sample("weights", dist.Dirichlet(jnp.ones(num_components)))
    locs = numpyro.sample("locs", dist.Normal(0.0, 3.0).expand([num_components]))
    with numpyro.plate("data", y.shape[0]):
        z = numpyro.sample("z", dist.Categorical(weights))
        numpyro.sample("y", dist.Normal(locs[z], 1.0), obs=y)


def test_a_later_reading_compiles_nothing(caplog):
    """The kernels read a model several times, each through a new ``conditioned`` wrapper
    and with other keys: one program in all; new data of other shapes compile it again."""
    y = jnp.asarray([0.1, 2.2, -0.3, 1.8, 0.4])
    _, first = _compilations(
        caplog, lambda: sites.reading_trace(conditioned(mixture), random.key(0), (y,), {})
    )
    assert len(first) == 1, first

    def read_eagerly():
        # as the discrete target reads it inside the compiled `init`
        with jax.ensure_compile_time_eval():
            return sites.reading_trace(conditioned(mixture), random.key(1), (y + 1.0,), {})

    again, later = _compilations(caplog, read_eagerly)
    assert later == []
    np.testing.assert_allclose(again["y"]["value"], y + 1.0)
    _, longer = _compilations(
        caplog, lambda: sites.reading_trace(conditioned(mixture), random.key(1), (jnp.ones(7),), {})
    )
    assert len(longer) == 1, longer


def test_typed_and_raw_keys_share_one_reading(caplog):
    """`LBPGibbs` reads the model with a key folded from the user's (``random.PRNGKey``,
    raw) and the target at ``random.key(0)`` (typed): one program for both, the same draws."""
    y = jnp.asarray([0.1, 2.2, -0.3, 1.8, 0.6, 1.1])  # a shape no other test reads
    typed, first = _compilations(
        caplog, lambda: sites.reading_trace(conditioned(mixture), random.key(5), (y,), {})
    )
    raw, later = _compilations(
        caplog, lambda: sites.reading_trace(conditioned(mixture), random.PRNGKey(5), (y,), {})
    )
    assert len(first) == 1 and later == [], (first, later)
    _assert_same_trace(raw, typed)
    _assert_same_trace(typed, _op_by_op(conditioned(mixture), random.key(5), (y,), {}))


def test_a_reading_inside_a_trace_is_concrete():
    """``init`` under ``jit`` reads the model at concrete values: the compiled reading runs,
    it is not staged into the caller's program."""
    y = jnp.asarray([0.1, 2.2, -0.3])
    key = random.key(0)

    def read(_):
        trace = sites.reading_trace(mixture, key, (y,), {})
        assert not isinstance(trace["z"]["value"], jax.core.Tracer)
        assert not isinstance(trace["weights"]["fn"].concentration, jax.core.Tracer)
        return trace["z"]["value"]

    jax.jit(read)(0.0)


class ScaledNormal(dist.Normal):
    """A user's distribution with an attribute numpyro's pytree fields do not know."""

    def __init__(self, loc, scale, factor):
        self.factor = factor
        super().__init__(loc, scale * factor)


def scaled_model(y, factor):
    b = numpyro.sample("b", dist.Bernoulli(0.5))
    # `factor` computed from a model argument (traced in the program) or a constant
    numpyro.sample("y", ScaledNormal(b, 1.0, factor if np.isscalar(factor) else factor[0]), obs=y)


def test_attributes_outside_the_pytree_fields_are_kept():
    """An attribute numpyro's rebuild drops (``Independent.reparametrized_params``, a
    user's own) comes back as it was; one holding a computed value cannot come out of the
    program, and the model is read op by op."""
    y = jnp.asarray([0.3])
    constant = sites._compiled_reading(scaled_model, random.key(0), (y, 2.0), {})
    assert constant is not None and constant["y"]["fn"].factor == 2.0
    assert sites._compiled_reading(scaled_model, random.key(0), (y, jnp.asarray([2.0])), {}) is None
    computed = sites.reading_trace(scaled_model, random.key(0), (y, jnp.asarray([2.0])), {})
    assert float(computed["y"]["fn"].factor) == 2.0


def test_traced_inputs_are_read_op_by_op():
    """Conditioning traced under ``vmap`` cannot be a constant of a cached program: read op
    by op, as before, with the traced values staged."""
    y = jnp.asarray([0.1, 2.2, -0.3])

    def read(locs):
        kwargs = {"_gibbs_sites": {"locs": locs}}
        assert sites._compiled_reading(conditioned(mixture), random.key(0), (y,), kwargs) is None
        trace = sites.reading_trace(conditioned(mixture), random.key(0), (y,), kwargs)
        return trace["y"]["fn"].loc

    locs = jax.vmap(read)(jnp.asarray([[0.0, 2.0], [1.0, 3.0]]))
    assert locs.shape[0] == 2


def discrete_only(field, counts):
    """Discrete latent sites of three kinds beside observed data: what a chain's initial
    values are drawn for when the kernel samples the whole model."""
    with numpyro.plate("sites", field.shape[0]):
        x = numpyro.sample("x", dist.Bernoulli(logits=field))
        label = numpyro.sample("label", dist.Categorical(jnp.array([0.2, 0.3, 0.5])))
        n = numpyro.sample("n", dist.Poisson(4.0 + x + label))
        numpyro.sample("counts", dist.Binomial(n + counts, 0.5), obs=counts)


def test_initial_values_are_numpyros_prior_draws(caplog):
    """A chain's initial values (``initial_position``) are the draws numpyro's
    ``prototype_trace`` makes with the chain's key, read by the model's compiled reading
    program, the one that read the model's sites: no chain compiles a reading of its own."""
    args = (jnp.linspace(-2.0, 2.0, 6), jnp.arange(6))
    target = model_target(
        discrete_only, random.key(0), args, {}, weights="exact", ordinal_window=None
    )
    for seed in range(2):
        key = random.key(10 + seed)
        x, compiled = _compilations(
            caplog, lambda key=key: initial_position(target, key, None, args, {})
        )
        assert compiled == []
        draw = prototype_trace(discrete_only, key, args, {})
        expected = {name: draw[name]["value"] for name in target.layout.names}
        np.testing.assert_array_equal(np.asarray(x), np.asarray(target.layout.flatten(expected)))


# --- the support bounds (``numpyro_discrete.model.bounds``) ---------------------------------


def _supports_both_ways(model, args):
    """The supports of the model's discrete sites read by one traced program and op by op
    (the definition), with every latent site abstract."""
    model_trace = sites.reading_trace(conditioned(model), random.key(0), args, {})
    latent = {name: model_trace[name]["value"] for name in latent_sample_sites(model_trace)}
    discrete = discrete_sites(model_trace)
    traced = bounds._traced_supports(model, latent, args, {}, discrete)
    eager = bounds._supports_at(model, latent, latent, args, {}, discrete)
    return traced, eager, discrete


def _bound_values(support):
    return [np.asarray(b) for b in bounds._bounds(support)]


def jnp_bounds(counts, levels):
    """Bounds computed with ``jnp`` from data and a closed-over array, a Poisson (bounded
    below by a Python number), a categorical and a latent-dependent Binomial total."""
    numpyro.sample("k", dist.Binomial(counts.astype(jnp.int32), 0.4))
    numpyro.sample("m", dist.DiscreteUniform(0, jnp.max(levels)))
    numpyro.sample("c", dist.Categorical(jnp.ones(3) / 3).expand([2]))
    n = numpyro.sample("n", dist.Poisson(3.0))
    rate = numpyro.sample("rate", dist.Exponential(0.2))
    numpyro.sample("from_n", dist.Binomial(n, 0.5))
    numpyro.sample("from_rate", dist.Binomial(jnp.ceil(rate).astype(jnp.int32), 0.5))


@pytest.mark.parametrize("name", FAST_GALLERY)
def test_traced_supports_are_the_op_by_op_ones_on_gallery_models(name):
    data = GALLERY[name].simulate(0, "exact")
    (traced, dependent), eager, discrete = _supports_both_ways(GALLERY[name].model, data.args)
    assert not dependent
    for site in discrete:
        expected = bounds._as_numpy(eager[site])
        assert type(traced[site]) is type(expected), site
        for value, reference in zip(
            _bound_values(traced[site]), _bound_values(expected), strict=True
        ):
            assert value.dtype == reference.dtype and np.array_equal(value, reference), site


def test_traced_supports_flag_exactly_the_bounds_computed_from_latent_values():
    args = (jnp.array([3.0, 5.0, 7.0]), jnp.array([1, 4, 2]))
    (traced, dependent), eager, discrete = _supports_both_ways(jnp_bounds, args)
    assert dependent == {name for name in discrete if bounds._is_traced(eager[name])}
    assert dependent == {"from_n", "from_rate"}
    for site in set(discrete) - dependent:
        expected = bounds._as_numpy(eager[site])
        assert type(traced[site]) is type(expected), site
        for value, reference in zip(
            _bound_values(traced[site]), _bound_values(expected), strict=True
        ):
            assert value.dtype == reference.dtype and np.array_equal(value, reference), site
