"""Where a chain of ``LBPGibbs`` starts (``numpyro_discrete.model.chain_start``): the best
of several short descents where the discrete sites are summed out, the inner kernel's
``init_strategy`` kept elsewhere, and a start in the main mode of a marginal with a local
one."""

import numpy as np
import pytest

import jax
from jax import random
import jax.numpy as jnp

import numpyro
import numpyro.distributions as dist
from numpyro.infer import NUTS, init_to_value

from numpyro_discrete import LBPGibbs
from numpyro_discrete.model.chain_start import descend, descended_start


def double_well(x):
    """Two wells: a shallow one at x = -1.86 (potential 0.97) and a deep one at x = 2.11
    (-1.03), apart by a barrier at x = -0.25 (2.1)."""
    return (x**2 - 4.0) ** 2 / 8.0 - 0.5 * x


def test_descend_reaches_the_minimum_of_its_well():
    for start, well in ((-1.5, -1.86), (1.0, 2.11)):
        end, values = descend(lambda x: double_well(x[0]), jnp.array([start]), steps=300, rate=0.05)
        assert abs(float(end[0]) - well) < 0.1, (start, end)
        # the potentials along the way: at the start first, at the end last
        assert values.shape == (301,)
        np.testing.assert_allclose(values[0], double_well(start), rtol=1e-6)
        np.testing.assert_allclose(values[-1], double_well(end[0]), rtol=1e-6)


def test_descended_start_keeps_the_lowest_candidate():
    """Starts around each well: the one kept is descended into the deeper well."""
    wells = jnp.array([-1.9, 2.1])
    keys = random.split(random.key(0), 2)
    starts = wells[random.randint(keys[0], (8,), 0, 2)] + 0.1 * random.normal(keys[1], (8,))
    assert np.any(np.asarray(starts) > 0) and np.any(np.asarray(starts) < 0)
    chosen = descended_start(lambda x: double_well(x[0]), starts[:, None])
    assert chosen.shape == (1,) and abs(float(chosen[0]) - 2.11) < 0.1


def test_descended_start_keeps_a_start_lower_than_every_descent():
    """A start is kept undescended where it is the lowest candidate: here the descent
    climbs out of a narrow well (its first step overshoots it)."""

    def potential(x):
        return jnp.where(jnp.abs(x[0]) < 1e-3, -10.0, x[0] ** 2)

    starts = jnp.array([[0.5], [0.0], [-0.7]])
    np.testing.assert_array_equal(descended_start(potential, starts), [0.0])


def test_descended_start_without_a_finite_potential_is_the_first_start():
    starts = random.normal(random.key(1), (3, 2))
    chosen = descended_start(lambda x: jnp.inf * jnp.sum(x**2), starts)
    np.testing.assert_array_equal(chosen, starts[0])


def mixture(y):
    """Two unit-variance components, weights 1/2, ordered means."""
    locs = numpyro.sample(
        "locs",
        dist.TransformedDistribution(
            dist.Normal(0.0, 5.0).expand([2]), dist.transforms.OrderedTransform()
        ),
    )
    with numpyro.plate("data", y.shape[0]):
        z = numpyro.sample("z", dist.Categorical(jnp.ones(2) / 2))
        numpyro.sample("y", dist.Normal(locs[z], 1.0), obs=y)


Y = jnp.concatenate([jnp.full(20, -3.0), jnp.full(20, 3.0)])


@pytest.mark.parametrize("num_starts", [1, 4])
def test_lbp_gibbs_starts_at_the_best_of_its_descents(num_starts):
    """The mixture's labels are summed out (``CollapsedDraw``): with 4 starts the chain
    starts near the posterior mode of the means, (-3, 3); with 1 where ``init_to_uniform``
    puts it, the first mean in (-2, 2) (the ordered transform keeps it unconstrained)."""
    kernel = LBPGibbs(NUTS(mixture), num_starts=num_starts)
    state = kernel.init(random.key(0), 10, None, (Y,), {})
    assert type(kernel.discrete_kernel).__name__ == "CollapsedDraw"
    locs = np.asarray(kernel.postprocess_fn((Y,), {})(state.z)["locs"])
    if num_starts == 4:
        np.testing.assert_allclose(locs, [-3.0, 3.0], atol=0.5)
    else:
        assert abs(locs[0]) < 2.0


def test_vectorized_chains_each_start_at_the_best_of_their_descents():
    """A batch of keys (``chain_method="vectorized"``): the descents run under ``vmap``,
    and each chain starts near the mode, at its own start."""
    kernel = LBPGibbs(NUTS(mixture), num_starts=4)
    state = kernel.init(random.split(random.key(0), 2), 10, None, (Y,), {})
    locs = np.asarray(jax.vmap(kernel.postprocess_fn((Y,), {}))(state.z)["locs"])
    np.testing.assert_allclose(locs, [[-3.0, 3.0]] * 2, atol=0.5)
    assert not np.array_equal(locs[0], locs[1])


def test_a_strategy_that_gives_values_is_kept():
    """``init_to_value`` puts the chain where the user asked, descents or not."""
    values = {"locs": jnp.array([-1.0, 0.5])}
    kernel = LBPGibbs(NUTS(mixture, init_strategy=init_to_value(values=values)), num_starts=4)
    state = kernel.init(random.key(0), 10, None, (Y,), {})
    locs = kernel.postprocess_fn((Y,), {})(state.z)["locs"]
    np.testing.assert_allclose(locs, values["locs"], rtol=1e-5)


@pytest.mark.parametrize("num_starts", [0, 2.5])
def test_num_starts_is_a_positive_int(num_starts):
    error = ValueError if num_starts == 0 else TypeError
    with pytest.raises(error, match="`num_starts` must be"):
        LBPGibbs(NUTS(mixture), num_starts=num_starts)
