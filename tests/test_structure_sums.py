"""Structure through sums: factors written as sums (``jnp.sum``, ``.sum()``, sums of sums, a
constant times a sum) are split into their summands, so that detection finds the structure
users write; truly dense factors stay dense."""

import numpy as np
import pytest

import jax
from jax import random
import jax.numpy as jnp

import numpyro
import numpyro.distributions as dist

from numpyro_discrete.model.target import DiscreteTarget
from numpyro_discrete.structure.dependencies import detect_dependencies
from numpyro_discrete.structure.sums import split_sums


def spins(x):
    return 2.0 * x - 1.0


def lattice_summed(size=8):
    s = spins(numpyro.sample("x", dist.Bernoulli(0.5).expand([size, size])))
    pairs = jnp.sum(s[1:, :] * s[:-1, :]) + jnp.sum(s[:, 1:] * s[:, :-1])
    numpyro.factor("ising", jnp.sum(0.1 * s) - 0.4 * pairs)


def chain_sum_of_sums(length=30):
    x = numpyro.sample("x", dist.Bernoulli(0.5).expand([length]))
    prior = dist.Bernoulli(0.3).log_prob(x).sum()
    numpyro.factor("chain", prior + (0.8 * (x[1:] == x[:-1])).sum() - jnp.sum(x[1:] * x[:-1]))


def mixture_labels_summed(n=20):
    z = numpyro.sample("z", dist.Categorical(jnp.ones(3) / 3).expand([n]))
    locs = jnp.array([-2.0, 0.0, 2.0])
    data = jnp.linspace(-3.0, 3.0, n)
    numpyro.factor("lik", dist.Normal(locs[z], 1.0).log_prob(data).sum())


def product_of_sums(n=6):
    x = numpyro.sample("x", dist.Bernoulli(0.5).expand([n]))
    numpyro.factor("dense", 0.1 * jnp.sum(x) * jnp.sum(x[::-1] * 0.5))


def logsumexp_factor(n=6):
    x = numpyro.sample("x", dist.Bernoulli(0.5).expand([n]))
    numpyro.factor("dense", jax.nn.logsumexp(0.3 * x))


def rbm_bilinear(num_visible=6, num_hidden=3):
    """An RBM's energy as users write it: ``h @ W @ v``, one scalar."""
    weights = jnp.asarray(np.random.default_rng(1).normal(size=(num_hidden, num_visible)))
    v = numpyro.sample("v", dist.Bernoulli(0.5).expand([num_visible]))
    h = numpyro.sample("h", dist.Bernoulli(0.5).expand([num_hidden]))
    numpyro.factor("interaction", h @ weights.astype(jnp.float32) @ v)


def rbm_einsum(num_visible=6, num_hidden=3):
    weights = jnp.asarray(np.random.default_rng(1).normal(size=(num_hidden, num_visible)))
    v = numpyro.sample("v", dist.Bernoulli(0.5).expand([num_visible]))
    h = numpyro.sample("h", dist.Bernoulli(0.5).expand([num_hidden]))
    numpyro.factor("interaction", 0.5 * jnp.einsum("j,jk,k->", h, weights, v).astype(jnp.float32))


def quadratic_form_chain(n=8):
    """``s J s`` with a chain's couplings in ``J``: a sum of ``s_i J_ij s_j``, each on two
    coordinates; detection does not read the zeros of ``J`` (a product with a constant zero
    still depends on the other operand), so every pair is coupled."""
    couplings = np.diag(np.full(n - 1, 0.4), 1)
    s = spins(numpyro.sample("x", dist.Bernoulli(0.5).expand([n])))
    numpyro.factor("ising", s @ jnp.asarray(couplings, jnp.float32) @ s)


def target_of(model):
    return DiscreteTarget.from_model(model, random.key(0), (), {})


@pytest.mark.parametrize(
    "model, num_colours",
    [
        (lattice_summed, 2),
        (chain_sum_of_sums, 2),
        (mixture_labels_summed, 1),
        (rbm_bilinear, 2),
        (rbm_einsum, 2),
    ],
)
def test_summed_factors_expose_the_structure(model, num_colours):
    target = target_of(model)
    assert target.structure.dense_terms.size == 0
    assert target.num_colours == num_colours


def test_a_quadratic_form_is_pairwise():
    target = target_of(quadratic_form_chain)
    assert target.structure.dense_terms.size == 0
    assert np.bincount(target.structure.pair_terms).max() == 2


@pytest.mark.parametrize("model", [product_of_sums, logsumexp_factor])
def test_dense_factors_stay_dense(model):
    target = target_of(model)
    assert target.structure.dense_terms.size > 0
    assert target.num_colours == target.num_coords


@pytest.mark.parametrize(
    "model",
    [lattice_summed, chain_sum_of_sums, product_of_sums, rbm_bilinear, quadratic_form_chain],
)
def test_split_terms_sum_to_the_log_density(model):
    target = target_of(model)
    rng = np.random.default_rng(0)
    # compiled, as in a step (op by op, the model's operations compile one by one)
    log_terms, log_density = jax.jit(target.log_terms()), jax.jit(target.log_density())
    for _ in range(3):
        x = jnp.asarray(rng.integers(0, 2, target.num_coords), jnp.int32)
        np.testing.assert_allclose(jnp.sum(log_terms(x)), log_density(x), rtol=1e-5, atol=1e-4)


def summed(x):
    x = x.astype(jnp.float32)
    weighted = 0.5 * jnp.sum(x[1:] * x[:-1]) - jnp.sum(x**2, axis=0) / 3.0
    nested = jnp.sum(jnp.reshape(x[:6], (2, 3)) * 0.2, axis=1).sum()
    return jnp.concatenate([jnp.ravel(weighted + nested), 2.0 * x, jnp.ravel(jnp.sum(x) ** 2)])


def test_split_sums_under_jit_vmap_and_derivatives():
    split = split_sums(summed)
    x = jnp.array([1, 0, 1, 1, 0, 1, 1], jnp.int32)
    batch = jnp.stack([x, 1 - x])
    np.testing.assert_allclose(split(x).sum(), summed(x).sum(), rtol=1e-6)
    np.testing.assert_allclose(
        jax.vmap(split)(batch).sum(1), jax.vmap(summed)(batch).sum(1), rtol=1e-6
    )
    np.testing.assert_allclose(jax.jit(split)(x), split(x), rtol=1e-6)
    xf = x.astype(jnp.float32)
    np.testing.assert_allclose(
        jax.grad(lambda y: split(y).sum())(xf), jax.grad(lambda y: summed(y).sum())(xf), rtol=1e-5
    )
    # one term per summand of the splittable sums; the squared sum stays one (dense) term
    dependencies = detect_dependencies(split, np.asarray(x))
    assert dependencies.dense.sum() == 1
    assert dependencies.num_terms == 1 + 7 + 1 + (6 + 7) + 6
    sizes = np.bincount(dependencies.terms, minlength=dependencies.num_terms)
    assert sizes[~dependencies.dense].max() == 2


def test_products_of_a_dot_are_its_summands():
    """``h @ W @ v`` splits into the ``h_j W_jk v_k``, each on two coordinates; a sum the
    program computes (here squared) keeps the program's own value, bit for bit."""
    weights = jnp.asarray(np.random.default_rng(2).normal(size=(3, 4)), jnp.float32)

    def terms(x):
        h, v = x[:3].astype(jnp.float32), x[3:].astype(jnp.float32)
        return jnp.stack([h @ weights @ v, jnp.sum(weights @ v) ** 2])

    split = split_sums(terms)
    x = jnp.array([1, 0, 1, 1, 1, 0, 1], jnp.int32)
    np.testing.assert_allclose(split(x).sum(), terms(x).sum(), rtol=1e-6)
    assert split(x)[1] == terms(x)[1]
    dependencies = detect_dependencies(split, np.asarray(x))
    assert dependencies.num_terms == 2 + 3 * 4
    sizes = np.bincount(dependencies.terms, minlength=dependencies.num_terms)
    # the first term's place (zero: its value is in the products), the squared sum on the
    # 4 coordinates of v, and the 12 products on one h and one v each
    np.testing.assert_array_equal(sizes[:2], [0, 4])
    np.testing.assert_array_equal(sizes[2:], 2)


def test_a_large_dot_stays_one_value(monkeypatch):
    """Past ``MAX_DOT_SUMMANDS`` products a dot is not split (its products would cost
    memory at every evaluation)."""
    from numpyro_discrete.structure import sums

    monkeypatch.setattr(sums, "MAX_DOT_SUMMANDS", 3)
    weights = jnp.ones((3, 4), jnp.float32)
    split = split_sums(lambda x: jnp.atleast_1d(x[:3].astype(jnp.float32) @ weights @ x[3:]))
    assert split(jnp.ones(7, jnp.int32)).shape == (1,)


def test_detection_through_sums_at_a_hundred_thousand_coordinates():
    def chain(n=100_000):
        s = spins(numpyro.sample("x", dist.Bernoulli(0.5).expand([n])))
        numpyro.factor("coupling", 0.5 * jnp.sum(s[1:] * s[:-1]))

    assert target_of(chain).num_colours == 2
