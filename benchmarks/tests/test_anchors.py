"""The hand-written anchors the benchmarks compare against are samplers too: each must leave
its target invariant, or a ratio against it means nothing."""

import itertools

import numpy as np
from scipy import stats

import jax
from jax import random
import jax.numpy as jnp

from numpyro.infer.util import log_density

from benchmarks.targets import fhmm_ffbs_gibbs_fn, fhmm_model


def test_ffbs_gibbs_sweep_leaves_the_exact_conditional_invariant():
    # x | w, b, sigma, y of an FHMM with L = 3 steps and K = 2 chains: 64 states, enumerated
    num_steps, num_chains, num_draws = 3, 2, 40_000
    y = jnp.array([0.3, 1.6, 0.9])
    params = {"w": jnp.array([1.2, -0.7]), "b": jnp.array(0.1), "sigma": jnp.array(0.6)}
    states = np.array(list(itertools.product([0, 1], repeat=num_steps * num_chains)))
    states = states.reshape(-1, num_steps, num_chains)

    def log_joint(x):
        return log_density(fhmm_model, (y, num_chains), {}, {**params, "x": x})[0]

    log_p = np.asarray(jax.vmap(log_joint)(jnp.asarray(states)), np.float64)
    probs = np.exp(log_p - np.logaddexp.reduce(log_p))

    # states drawn from the conditional, then one sweep of the anchor from each: the sweep's
    # output must have the same distribution
    gibbs_fn = fhmm_ffbs_gibbs_fn(y, num_chains)
    start_key, sweep_key = random.split(random.key(0))
    start = random.choice(start_key, len(states), (num_draws,), p=jnp.asarray(probs))
    sweep = jax.jit(jax.vmap(lambda key, x: gibbs_fn(key, {"x": x}, params)["x"]))
    after = np.asarray(sweep(random.split(sweep_key, num_draws), jnp.asarray(states)[start]))
    index = after.reshape(num_draws, -1) @ (2 ** np.arange(num_steps * num_chains - 1, -1, -1))
    counts = np.bincount(index, minlength=len(states))
    expected = num_draws * probs
    kept = expected >= 5
    observed = np.r_[counts[kept], counts[~kept].sum()]
    expected = np.r_[expected[kept], expected[~kept].sum()]
    assert stats.chisquare(observed, expected).pvalue > 1e-4
    # and it moves: the sweep is not the identity
    assert np.mean(index != start) > 0.3
