"""The partially collapsed sampler: :class:`CollapsedDraw` as LBPGibbs's discrete block, the
inner kernel on the model with the discrete sites summed out. Exact checks of the code MCMC
runs (the inner kernel's model is the enumerated marginal, in value and gradient; the
draw's table is the enumerated conditional), the choice from the structure, the truncation
warning, and draws against a posterior computed on a grid, under every chain method."""

import functools
import itertools
import logging

import numpy as np
import pytest

import jax
from jax import random
import jax.numpy as jnp
from jax.scipy.special import logsumexp

import numpyro
from numpyro.contrib.control_flow import scan
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS
from numpyro.infer.gibbs import with_conditioning
from numpyro.infer.util import log_density, potential_energy

from numpyro_discrete import BlockGibbs, ChromaticGibbs, CollapsedDraw, LBPGibbs, ModelError
from numpyro_discrete.core import collapse
from numpyro_discrete.core.rows import row_log_softmax
from numpyro_discrete.gallery.sequences import hmm_smoothed_marginals

import helpers

Y = np.array([-1.2, 0.3, 2.1, 1.7, -0.4])
COUNTS = np.array([[3.0, 1.0], [0.0, 2.0], [4.0, 4.0]])


def label_model(y):
    """Labels of three values, a scalar location they scale and a scale: the labels are
    independent given the continuous sites."""
    loc = numpyro.sample("loc", dist.Normal(0.0, 2.0))
    scale = numpyro.sample("scale", dist.HalfNormal(1.5))
    with numpyro.plate("data", y.shape[0]):
        z = numpyro.sample("z", dist.Categorical(jnp.array([0.3, 0.5, 0.2])))
        numpyro.sample("y", dist.Normal(loc * (z - 1.0), scale), obs=y)


def count_model(counts):
    """An N-mixture: Poisson abundances, binomial counts (supports unbounded above)."""
    rate = numpyro.sample("rate", dist.Exponential(0.3))
    detection = numpyro.sample("detection", dist.Beta(2.0, 2.0))
    with numpyro.plate("sites", counts.shape[0]):
        abundance = numpyro.sample("N", dist.Poisson(rate))
        with numpyro.plate("visits", counts.shape[1], dim=-2):
            numpyro.sample("counts", dist.Binomial(abundance, detection), obs=counts.T)


def initialised(model, args, discrete_kernel=None):
    kernel = LBPGibbs(NUTS(model), discrete_kernel=discrete_kernel or "auto")
    kernel.init(random.key(0), 0, None, args, {})
    return kernel


def enumerated_marginal(model, args, theta, site, values, shape):
    """``log sum_x pi(x, theta)`` over every `x` in ``values^shape``, by brute force."""
    states = jnp.array(list(itertools.product(values, repeat=int(np.prod(shape)))))
    states = states.reshape((-1,) + shape)

    def log_joint(theta, x):
        return log_density(model, args, {}, {**theta, site: x})[0]

    return logsumexp(jax.vmap(log_joint, in_axes=(None, 0))(theta, states))


def check_summed_out_model(kernel, model, args, site, num_values, thetas, rng, atol=0.0):
    """The inner kernel's model of `kernel` (an initialised ``LBPGibbs`` whose discrete
    kernel sums `site` out) against the marginal of `model` enumerated over `site`'s
    `num_values` values: in value (1e-10) and gradient (1e-8) at each of `thetas` and a
    random value of `site`. Returns the enumerated marginal, jitted."""
    shape = args[0].shape
    inner_model = kernel.inner_kernel.model

    @jax.jit
    def summed_out(theta, x):
        return log_density(inner_model, args, with_conditioning({}, x), theta)[0]

    @jax.jit
    def exact(theta):
        return enumerated_marginal(model, args, theta, site, range(num_values), shape)

    for theta in thetas:
        x = {site: jnp.asarray(rng.integers(0, num_values, shape[0]))}
        np.testing.assert_allclose(summed_out(theta, x), exact(theta), rtol=1e-10)
        grads = jax.grad(summed_out)(theta, x), jax.grad(exact)(theta)
        for name in theta:
            np.testing.assert_allclose(grads[0][name], grads[1][name], rtol=1e-8, atol=atol)
    return exact


def test_the_inner_kernels_model_is_the_enumerated_marginal(x64):
    """In value and gradient at random continuous and discrete values, and as numpyro's
    potential in the unconstrained space (the Jacobian of a constrained site kept)."""
    y = jnp.asarray(Y)
    kernel = initialised(label_model, (y,))
    assert isinstance(kernel.discrete_kernel, CollapsedDraw)
    inner_model = kernel.inner_kernel.model
    rng = np.random.default_rng(0)
    thetas = [
        {"loc": jnp.asarray(rng.normal() * 2), "scale": jnp.asarray(rng.uniform(0.3, 2))}
        for _ in range(3)
    ]
    exact = check_summed_out_model(kernel, label_model, (y,), "z", 3, thetas, rng)

    # numpyro's potential of the summed-out model, in the unconstrained space, is the
    # model's potential at the same discrete values minus the sum over them: the
    # log-Jacobian of `scale`'s transform counted once, as in the model's
    x = {"z": jnp.array([0, 2, 1, 1, 0])}
    kwargs = with_conditioning({}, x)
    unconstrained = {"loc": jnp.asarray(0.7), "scale": jnp.asarray(-0.4)}
    theta = {"loc": jnp.asarray(0.7), "scale": jnp.exp(jnp.asarray(-0.4))}
    # compiled (op by op, the models' operations compile one by one)
    summed = jax.jit(lambda: potential_energy(inner_model, (y,), kwargs, unconstrained))()
    at_x = jax.jit(
        lambda: potential_energy(
            numpyro.infer.gibbs.conditioned(label_model), (y,), kwargs, unconstrained
        )
    )()
    log_pi_x = jax.jit(lambda: log_density(label_model, (y,), {}, {**theta, **x})[0])()
    np.testing.assert_allclose(summed, at_x - (exact(theta) - log_pi_x), rtol=1e-10)


def test_a_truncated_count_sums_to_the_marginal(x64):
    counts = jnp.asarray(COUNTS)
    kernel = initialised(count_model, (counts,))
    draw = kernel.discrete_kernel
    assert isinstance(draw, CollapsedDraw) and draw.table.truncated.all()
    theta = {"rate": jnp.asarray(3.0), "detection": jnp.asarray(0.6)}
    x = {"N": jnp.array([5, 3, 6])}  # the site's dtype
    inner_model = kernel.inner_kernel.model
    summed_out = jax.jit(
        lambda: log_density(inner_model, (counts,), with_conditioning({}, x), theta)[0]
    )()

    # the sites are independent: the marginal is a sum of per-site sums (to 400)
    @jax.jit
    def exact():
        def site_terms(n, site_counts):
            log_p = dist.Poisson(theta["rate"]).log_prob(n)
            return log_p + jnp.sum(dist.Binomial(n, theta["detection"]).log_prob(site_counts))

        per_site = jax.vmap(jax.vmap(site_terms, (0, None)), (None, 0))(jnp.arange(401), counts)
        log_prior = dist.Exponential(0.3).log_prob(theta["rate"])
        return (
            log_prior
            + dist.Beta(2.0, 2.0).log_prob(theta["detection"])
            + jnp.sum(logsumexp(per_site, axis=1))
        )

    np.testing.assert_allclose(summed_out, exact(), rtol=1e-10)


def test_the_draw_is_the_enumerated_conditional(x64):
    kernel = initialised(label_model, (jnp.asarray(Y),))
    draw = kernel.discrete_kernel
    theta = {"loc": jnp.asarray(1.3), "scale": jnp.asarray(0.8)}
    # each side compiled whole: op by op, the model's operations compile one by one
    log_terms = draw._target.log_terms((jnp.asarray(Y),), with_conditioning({}, theta))
    _, s = jax.jit(lambda: collapse.log_potentials(log_terms, draw.table))()
    # brute force: the joint over 3^5 label vectors, marginalised to each coordinate
    states = np.array(list(itertools.product(range(3), repeat=Y.shape[0])))
    log_joint = jax.jit(
        jax.vmap(lambda x: log_density(label_model, (jnp.asarray(Y),), {}, {**theta, "z": x})[0])
    )(jnp.asarray(states))
    probs = np.exp(np.asarray(log_joint - logsumexp(log_joint)))
    for j in range(Y.shape[0]):
        marginal = np.bincount(states[:, j], weights=probs, minlength=3)
        np.testing.assert_allclose(np.exp(row_log_softmax(s))[j], marginal, rtol=1e-10)
    # and the kernel's draws follow it (chi-square over 4000 draws of coordinate 0)
    step = jax.jit(lambda key: collapse.draw(key, draw.table, s)[0])
    draws = np.asarray(jax.vmap(step)(random.split(random.key(1), 4000)))
    expected = 4000 * np.bincount(states[:, 0], weights=probs, minlength=3)
    chi2 = np.sum((np.bincount(draws[:, 0], minlength=3) - expected) ** 2 / expected)
    assert chi2 < 13.8  # 2 degrees of freedom, p = 0.001


@pytest.mark.parametrize(
    "model, data, theta",
    [
        (label_model, Y, {"loc": 1.3, "scale": 0.8}),
        # each count's terms are a column of the visits' plate: one piece per visit
        (count_model, COUNTS, {"rate": 3.0, "detection": 0.6}),
    ],
)
def test_sums_by_slices_equal_sums_by_gathers(model, data, theta, x64):
    """The two ways :func:`collapse.log_potentials` sums each coordinate's terms agree in
    value and in the marginal's gradient: the stencil's slices (what runs on these
    layouts) and the gathers by ``coord_terms`` (the definition, and what runs where the
    pairs form no stencil)."""
    draw = initialised(model, (jnp.asarray(data),)).discrete_kernel
    assert draw.table.stencil is not None
    by_gathers = draw.table._replace(stencil=None)

    def potentials(theta, table):
        kwargs = with_conditioning({}, theta)
        return collapse.log_potentials(draw._target.log_terms((jnp.asarray(data),), kwargs), table)

    def marginal(theta, table):
        return collapse.log_marginal(*potentials(theta, table))

    # each table's pair compiled whole: op by op, the terms compile one by one
    def both(table):
        return jax.jit(lambda theta: (potentials(theta, table), jax.grad(marginal)(theta, table)))

    theta = {name: jnp.asarray(value) for name, value in theta.items()}
    (fast_parts, fast_grads), (slow_parts, slow_grads) = (
        both(draw.table)(theta),
        both(by_gathers)(theta),
    )
    for fast, slow in zip(fast_parts, slow_parts, strict=True):
        np.testing.assert_allclose(fast, slow, rtol=1e-12 if x64 else 1e-6)
    grads = fast_grads, slow_grads
    for name in theta:
        np.testing.assert_allclose(grads[0][name], grads[1][name], rtol=1e-10 if x64 else 1e-5)


def test_the_choice_reports_collapsing_and_a_given_kernel_stays(caplog):
    with caplog.at_level(logging.INFO, logger="numpyro_discrete"):
        kernel = initialised(label_model, (jnp.asarray(Y),))
    assert isinstance(kernel.discrete_kernel, CollapsedDraw)
    assert "discrete kernel CollapsedDraw" in caplog.text
    given = initialised(label_model, (jnp.asarray(Y),), ChromaticGibbs(label_model))
    assert isinstance(given.discrete_kernel, ChromaticGibbs)
    assert given.inner_kernel.model is not kernel.inner_kernel.model


def test_one_coordinate_is_not_summed_out():
    def change_point(y):
        rate = numpyro.sample("rate", dist.Exponential(1.0).expand([2]))
        tau = numpyro.sample("tau", dist.Categorical(logits=jnp.zeros(y.shape[0])))
        late = jnp.arange(y.shape[0]) >= tau
        numpyro.sample("y", dist.Poisson(jnp.where(late, rate[1], rate[0])), obs=y)

    kernel = initialised(change_point, (jnp.array([1.0, 0.0, 2.0, 5.0, 4.0]),))
    assert not isinstance(kernel.discrete_kernel, CollapsedDraw)


def test_interacting_chains_are_refused():
    def two_chains():  # a factorial HMM's shape: the chains meet in every observation
        theta = numpyro.sample("theta", dist.Normal())
        x = numpyro.sample("x", dist.Bernoulli(0.5).expand([2, 6]))
        numpyro.factor("stick", 1.5 * jnp.sum(x[:, 1:] == x[:, :-1]) + theta * x[0, 0])
        numpyro.sample("y", dist.Normal(x[0] + 2.0 * x[1], 1.0), obs=jnp.arange(6.0) % 3)

    with pytest.raises(ModelError, match="CollapsedDraw.*independent.*chains interact"):
        initialised(two_chains, (), CollapsedDraw(two_chains))
    assert isinstance(initialised(two_chains, ()).discrete_kernel, BlockGibbs)


# --- chains summed out ---------------------------------------------------------------------

HMM_Y = np.array([0.1, 2.3, 1.8, -0.4, 0.2])


def hmm(y):
    """A Gaussian HMM of three states written with numpyro's ``scan``."""
    trans = numpyro.sample("trans", dist.Dirichlet(jnp.ones((3, 3)) + 2 * jnp.eye(3)).to_event(1))
    locs = numpyro.sample("locs", dist.Normal(jnp.array([0.0, 1.0, 2.0]), 1.0).to_event(1))

    def step(previous, y_t):
        x = numpyro.sample("x", dist.Categorical(trans[previous]))
        numpyro.sample("y", dist.Normal(locs[x], 0.7), obs=y_t)
        return x, None

    scan(step, 0, y)


def hmm_theta(rng):
    return {
        "trans": jnp.asarray(rng.dirichlet(np.ones(3), 3)),
        "locs": jnp.asarray(rng.normal(size=3)),
    }


def test_a_chain_is_summed_out_to_the_enumerated_marginal(x64):
    """The HMM written with ``scan``: chosen by default, and the inner kernel's model is the
    marginal over all ``3^5`` state sequences, in value and gradient."""
    y = jnp.asarray(HMM_Y)
    kernel = initialised(hmm, (y,))
    draw = kernel.discrete_kernel
    assert isinstance(draw, CollapsedDraw) and draw.chains is not None
    assert draw.blocks == {"x": "1 chain(s) of 5 along axis 0"}
    rng = np.random.default_rng(1)
    thetas = [hmm_theta(rng) for _ in range(3)]
    check_summed_out_model(kernel, hmm, (y,), "x", 3, thetas, rng, atol=1e-12)


def sequences(y):
    """Independent binary sequences, more of them than steps: ``x`` is a chain along both
    axes (no term couples two sequences), and the blocks run along the coupled one."""
    scale = numpyro.sample("scale", dist.HalfNormal(2.0))
    x = numpyro.sample("x", dist.Bernoulli(0.4).expand(y.shape).to_event(2))
    numpyro.factor("stick", 1.5 * jnp.sum(x[:, 1:] == x[:, :-1]))
    numpyro.sample("y", dist.Normal(scale * x, 1.0), obs=y)


def test_independent_sequences_are_summed_out_along_time(x64):
    y = jnp.asarray(np.random.default_rng(3).normal(1.0, 1.0, (4, 3)))
    kernel = initialised(sequences, (y,))
    draw = kernel.discrete_kernel
    assert isinstance(draw, CollapsedDraw) and draw.blocks == {"x": "4 chain(s) of 3 along axis 1"}

    @jax.jit
    def summed_out(scale):
        conditioning = with_conditioning({}, {"x": jnp.zeros((4, 3), jnp.int32)})
        return log_density(kernel.inner_kernel.model, (y,), conditioning, {"scale": scale})[0]

    @jax.jit
    def exact(scale):
        return enumerated_marginal(sequences, (y,), {"scale": scale}, "x", range(2), (4, 3))

    for scale in (0.4, 1.7):
        np.testing.assert_allclose(summed_out(scale), exact(scale), rtol=1e-10)
        np.testing.assert_allclose(jax.grad(summed_out)(scale), jax.grad(exact)(scale), rtol=1e-8)


def test_the_chain_draw_is_the_enumerated_conditional():
    """The draw MCMC runs (``CollapsedDraw.sample``) against the exact conditional of the
    state sequence given the continuous sites: chi-square over the 243 sequences."""
    y = jnp.asarray(HMM_Y)
    draw = initialised(hmm, (y,)).discrete_kernel
    theta = hmm_theta(np.random.default_rng(2))
    kwargs = with_conditioning({}, theta)
    states = np.array(list(itertools.product(range(3), repeat=HMM_Y.shape[0])))
    log_joint = jax.jit(jax.vmap(lambda x: log_density(hmm, (y,), {}, {**theta, "x": x})[0]))(
        jnp.asarray(states)
    )
    probs = np.exp(np.asarray(log_joint - logsumexp(log_joint)), dtype=np.float64)
    state = draw.init(random.key(0), 0, {"x": jnp.zeros(5, jnp.int32)}, (y,), kwargs)
    num_draws = 20000

    def one(key):
        return draw.sample(state._replace(rng_key=key), (y,), kwargs).z["x"]

    draws = np.asarray(jax.jit(jax.vmap(one))(random.split(random.key(3), num_draws)))
    index = np.ravel_multi_index(draws.T, (3,) * HMM_Y.shape[0])
    observed = np.bincount(index, minlength=states.shape[0])
    expected = num_draws * probs / probs.sum()
    # sequences expected 5 times or more, the rest pooled
    common = expected >= 5
    chi2 = np.sum((observed[common] - expected[common]) ** 2 / expected[common])
    rest_observed, rest_expected = observed[~common].sum(), expected[~common].sum()
    chi2 += (rest_observed - rest_expected) ** 2 / max(rest_expected, 1e-9)
    dof = int(common.sum())
    assert chi2 < dof + 4.0 * np.sqrt(2.0 * dof), (chi2, dof)


@pytest.mark.slow
@pytest.mark.parametrize("chain_method", ["sequential", "vectorized", "parallel"])
def test_chain_draws_match_the_enumerated_posterior(chain_method):
    """The default LBPGibbs on the HMM against NUTS with the states enumerated (numpyro's
    ``scan`` enumeration, exact in the states): ``locs`` and the posterior probability of
    each state at each step, in Monte Carlo standard errors of both."""
    y = jnp.asarray(HMM_Y)
    kernel = LBPGibbs(NUTS(hmm))
    mcmc = MCMC(kernel, num_warmup=500, num_samples=3000, num_chains=2,
                chain_method=chain_method, progress_bar=False)  # fmt: skip
    mcmc.run(random.key(4), y)
    assert kernel.discrete_kernel.chains is not None
    samples = mcmc.get_samples(group_by_chain=True)
    reference = hmm_reference()
    x = np.asarray(samples["x"])
    draws = {"locs": np.asarray(samples["locs"]), "states": np.stack([x == 0, x == 2], -1)}
    for name, value in draws.items():
        ess = numpyro.diagnostics.effective_sample_size(value)
        flat = value.reshape(-1, *value.shape[2:])
        error = np.abs(flat.mean(0) - reference[name])
        se = np.sqrt(flat.var(0) / ess + reference[name + "_se"] ** 2)
        assert np.all(error < 4.5 * se + 0.01), (name, flat.mean(0), reference[name])


@functools.cache
def hmm_reference():
    """``locs`` and the smoothed state probabilities of :func:`hmm` by NUTS on the model
    with the states enumerated (4 chains x 5000 draws), and their Monte Carlo errors."""
    y = jnp.asarray(HMM_Y)

    def enumerated(y):
        trans = numpyro.sample(
            "trans", dist.Dirichlet(jnp.ones((3, 3)) + 2 * jnp.eye(3)).to_event(1)
        )
        locs = numpyro.sample("locs", dist.Normal(jnp.array([0.0, 1.0, 2.0]), 1.0).to_event(1))

        def step(previous, y_t):
            x = numpyro.sample(
                "x", dist.Categorical(trans[previous]), infer={"enumerate": "parallel"}
            )
            numpyro.sample("y", dist.Normal(locs[x], 0.7), obs=y_t)
            return x, None

        scan(step, 0, y)

    mcmc = MCMC(NUTS(enumerated), num_warmup=500, num_samples=5000, num_chains=4,
                chain_method="vectorized", progress_bar=False)  # fmt: skip
    mcmc.run(random.key(5), y)
    samples = mcmc.get_samples(group_by_chain=True)
    locs = np.asarray(samples["locs"])
    flat = {k: np.asarray(v).reshape(-1, *np.shape(v)[2:]) for k, v in samples.items()}
    smoothed = jax.vmap(lambda trans, locs: hmm_smoothed_marginals(y, trans, locs, 0.7))(
        jnp.asarray(flat["trans"]), jnp.asarray(flat["locs"])
    )
    smoothed = np.asarray(smoothed)[:, :, [0, 2]]
    ess_locs = numpyro.diagnostics.effective_sample_size(locs)
    by_chain = smoothed.reshape(locs.shape[0], locs.shape[1], *smoothed.shape[1:])
    ess_states = numpyro.diagnostics.effective_sample_size(by_chain)
    return {
        "locs": flat["locs"].mean(0),
        "locs_se": flat["locs"].std(0) / np.sqrt(ess_locs),
        "states": smoothed.mean(0),
        "states_se": smoothed.std(0) / np.sqrt(ess_states),
    }


def test_a_truncation_that_cuts_posterior_mass_warns():
    counts = jnp.array([[30.0, 28.0], [25.0, 33.0]])
    kernel = LBPGibbs(NUTS(count_model), discrete_kernel=CollapsedDraw(count_model, max_values=40))
    mcmc = MCMC(kernel, num_warmup=10, num_samples=10, progress_bar=False)
    with pytest.warns(RuntimeWarning, match=r"sites \['N'\] are summed over their first 40"):
        mcmc.run(random.key(0), counts)


def grid_posterior():
    """Posterior means of ``loc``, ``sum_i z_i`` and ``loc * sum_i z_i`` of
    :func:`label_model`, on a grid of ``(loc, scale)`` with the labels summed exactly."""
    loc = np.linspace(-8.0, 8.0, 801)[:, None]
    scale = np.linspace(0.005, 8.0, 1600)[None, :]
    y, prior = np.asarray(Y), np.log([0.3, 0.5, 0.2])
    log_w = -0.5 * (loc / 2.0) ** 2 - 0.5 * (scale / 1.5) ** 2
    expected_sum = 0.0
    for y_i in y:
        log_site = np.stack(
            [
                prior[v] - 0.5 * ((y_i - loc * (v - 1.0)) / scale) ** 2 - np.log(scale)
                for v in range(3)
            ]
        )
        total = logsumexp(log_site, axis=0)
        log_w = log_w + total
        weights = np.exp(log_site - total)
        expected_sum = expected_sum + weights[1] + 2 * weights[2]
    w = np.exp(log_w - log_w.max())
    w /= w.sum()
    loc = np.broadcast_to(loc, w.shape)
    return {
        "loc": np.sum(w * loc),
        "z_sum": np.sum(w * expected_sum),
        "loc_z_sum": np.sum(w * loc * expected_sum),
    }


@pytest.mark.slow
@pytest.mark.parametrize("chain_method", ["sequential", "vectorized", "parallel"])
def test_draws_match_the_grid_posterior(chain_method):
    """A joint moment (``loc * sum z``) as well as the marginal ones: labels drawn before the
    continuous move instead of after it would pair each draw with stale ``loc``."""
    exact = grid_posterior()
    kernel = LBPGibbs(NUTS(label_model))
    mcmc = MCMC(kernel, num_warmup=500, num_samples=4000, num_chains=2,
                chain_method=chain_method, progress_bar=False)  # fmt: skip
    mcmc.run(random.key(3), jnp.asarray(Y))
    assert isinstance(kernel.discrete_kernel, CollapsedDraw)
    samples = mcmc.get_samples(group_by_chain=True)
    z_sum = np.asarray(samples["z"]).sum(-1)
    draws = {
        "loc": np.asarray(samples["loc"]),
        "z_sum": z_sum,
        "loc_z_sum": np.asarray(samples["loc"]) * z_sum,
    }
    for name, value in draws.items():
        ess = numpyro.diagnostics.effective_sample_size(value)
        error = abs(value.mean() - exact[name]) / (value.std() / np.sqrt(ess))
        assert error < 4.5, (name, value.mean(), exact[name])


def latent_bernoulli_model(data):
    """numpyro's ``test_hmc_gibbs.py::test_bernoulli_latent_model``, with ``z`` marked for
    enumeration and ``y`` not: both discrete, in one plate."""
    y_prob = numpyro.sample("y_prob", dist.Beta(1.0, 1.0))
    with numpyro.plate("data", data.shape[0]):
        y = numpyro.sample("y", dist.Bernoulli(y_prob))
        z = numpyro.sample("z", dist.Bernoulli(0.65 * y + 0.1), infer={"enumerate": "parallel"})
        numpyro.sample("obs", dist.Normal(2.0 * z, 1.0), obs=data)


def latent_bernoulli_posterior_mean(data):
    """``E[y_prob | data]`` on a grid: each datum's likelihood summed over ``y`` and ``z``."""
    p = np.linspace(0.0005, 0.9995, 1000)
    normal = [np.exp(-0.5 * (data - 2.0 * z) ** 2) for z in (0, 1)]
    per_y = [(1 - (0.65 * y + 0.1)) * normal[0] + (0.65 * y + 0.1) * normal[1] for y in (0, 1)]
    log_w = np.sum(np.log((1 - p[:, None]) * per_y[0] + p[:, None] * per_y[1]), axis=1)
    w = np.exp(log_w - log_w.max())
    return float(np.sum(w * p) / np.sum(w))


def test_a_site_marked_for_enumeration_beside_a_sampled_one():
    """``z`` summed out by numpyro's enumeration, ``y`` drawn beside it in the same plate:
    ``y_prob`` matches its posterior on a grid."""
    key_y, key_z, key_obs = random.split(random.key(0), 3)
    y = dist.Bernoulli(0.3).sample(key_y, (200,))
    z = dist.Bernoulli(0.65 * y + 0.1).sample(key_z)
    data = dist.Normal(2.0 * z, 1.0).sample(key_obs)
    kernel = LBPGibbs(NUTS(latent_bernoulli_model))
    mcmc = MCMC(kernel, num_warmup=300, num_samples=1500, progress_bar=False)
    mcmc.run(random.key(1), data)
    samples = mcmc.get_samples(group_by_chain=True)
    assert samples["y"].shape == (1, 1500, 200)
    helpers.assert_mean_within_mcse(
        samples["y_prob"], latent_bernoulli_posterior_mean(np.asarray(data)), what="y_prob"
    )
