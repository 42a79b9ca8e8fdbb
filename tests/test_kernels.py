"""Kernel-level behaviour of LBP, ALBP, ACS and DMALA: their states and extra fields, and
reproducibility: a key determines the samples, across runs, chain methods, pickling and
resuming.

What numpyro defines (``numpyro/infer/mcmc.py``): ``MCMC.run(key)`` splits `key` into one
key per chain the same way for every chain method, each chain starts from
``kernel.init(chain_key, ...)`` and every step takes its randomness from the state's
``rng_key`` only. ``warmup(key)`` then ``run(post_warmup_state.rng_key)`` is documented as
the same chain as ``run(key)``, and a run started from ``post_warmup_state = last_state``
with ``last_state.rng_key`` continues that chain. numpyro documents no bit-for-bit promise
between chain methods; "sequential" and "parallel" run the same per-chain program on the
same keys, "vectorized" runs it under ``vmap``, which XLA compiles to different (batched)
arithmetic."""

import functools
import pickle

import numpy as np
import pytest

from jax import random

from numpyro_discrete import ACS, ALBP, DMALA, LBP, ACSState, ALBPState, DMALAState, LBPState

from helpers import product_model, quick_mcmc

_mcmc = functools.partial(quick_mcmc, num_warmup=30, num_samples=60)


def _run(kernel, key, **kwargs):
    mcmc = _mcmc(kernel, **kwargs)
    mcmc.run(key, extra_fields=("accept_prob", "path_length"))
    return mcmc


def _assert_same_run(a, b):
    for name in ("x", "total"):
        np.testing.assert_array_equal(a.get_samples()[name], b.get_samples()[name])
    for name in ("accept_prob", "path_length"):
        np.testing.assert_array_equal(a.get_extra_fields()[name], b.get_extra_fields()[name])


# --- states and extra fields ----------------------------------------------------------------


def test_path_kernel_states_and_extra_fields():
    """LBPState holds the fixed path length; ALBPState the adapted ``R_t`` and its
    second-half mean (frozen after warmup); all are extra fields. LBP's state has no
    adaptation fields."""
    assert "mean_path_length" in ALBPState._fields
    assert not {"mean_path_length", "window_accept_prob"} & set(LBPState._fields)
    assert "num_flips" not in LBPState._fields + ALBPState._fields
    fields = ("accept_prob", "path_length", "num_changed")
    for kernel, state_type in (
        (LBP(product_model, path_length=3), LBPState),
        (ALBP(product_model), ALBPState),
    ):
        mcmc = _mcmc(kernel)
        extra_fields = fields + (("mean_path_length",) if state_type is ALBPState else ())
        mcmc.run(random.key(4), extra_fields=extra_fields)
        extra = mcmc.get_extra_fields()
        assert isinstance(mcmc.last_state, state_type)
        length = np.asarray(extra["path_length"])
        assert np.ptp(length) == 0 and 1.0 <= length[0] <= 6.0
        if state_type is LBPState:
            np.testing.assert_array_equal(length, 3.0)
        else:
            assert np.ptp(np.asarray(extra["mean_path_length"])) == 0  # frozen with R_t
        assert np.all((np.asarray(extra["num_changed"]) >= 0) & (extra["num_changed"] <= 6))
        assert np.all((extra["accept_prob"] >= 0) & (extra["accept_prob"] <= 1))


def test_coordinatewise_kernel_states_and_extra_fields():
    """ACSState holds the step's step size, balancing exponent and cycle position; DMALA's
    state holds its fixed pair, and no schedule or tuning state."""
    fields = ("step_size", "balancing", "num_changed")
    mcmc = _mcmc(DMALA(product_model, step_size=0.7, balancing=0.6))
    mcmc.run(random.key(5), extra_fields=fields)
    extra = mcmc.get_extra_fields()
    assert isinstance(mcmc.last_state, DMALAState)
    assert not {"cycle_position", "tuning"} & set(DMALAState._fields)
    np.testing.assert_allclose(extra["step_size"], 0.7, rtol=1e-6)
    np.testing.assert_allclose(extra["balancing"], 0.6, rtol=1e-6)
    mcmc = _mcmc(ACS(product_model, cycle_length=4), num_warmup=600, num_samples=8)
    mcmc.run(random.key(5), extra_fields=(*fields, "cycle_position"))
    assert isinstance(mcmc.last_state, ACSState)
    positions = np.asarray(mcmc.get_extra_fields()["cycle_position"])
    np.testing.assert_array_equal(np.diff(positions) % 4, 1)


def test_diagnostics_string():
    kernel = ALBP(product_model)
    assert kernel.weights_mode is None  # resolved at init
    state = kernel.init(random.key(0), 10, None, (), None)
    assert kernel.get_diagnostics_str(state) == "acc. prob=0.00, R=1.0"
    assert kernel.weights_mode == {"x": "gradient"}  # affine in each coordinate
    assert kernel.num_colours == 1


# --- reproducibility ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def reference():
    """ALBP on the product model, ``run(random.key(0))`` in one go."""
    return _run(ALBP(product_model), random.key(0))


def test_same_key_same_samples(reference):
    """A fresh kernel and MCMC object with the same key draw the same chain."""
    _assert_same_run(reference, _run(ALBP(product_model), random.key(0)))


def test_sequential_and_parallel_chains_are_identical():
    """Same keys, same per-chain program (two host devices, see conftest.py); the two
    chains are different chains."""
    runs = [
        _run(LBP(product_model), random.key(2), num_chains=2, chain_method=method)
        for method in ("sequential", "parallel")
    ]
    _assert_same_run(*runs)
    x = runs[0].get_samples(group_by_chain=True)["x"]
    assert not np.array_equal(x[0], x[1])


def test_vectorized_chains_are_reproducible():
    """Vectorized chains: the same key gives the same chains run after run (no promise of
    equality with the other chain methods, see the module docstring)."""
    mcmc = _mcmc(ALBP(product_model), num_chains=2, chain_method="vectorized")
    runs = []
    for _ in range(2):
        mcmc.run(random.key(3), extra_fields=("accept_prob", "path_length"))
        runs.append((mcmc.get_samples(), mcmc.get_extra_fields()))
    for first, second in zip(*runs, strict=True):
        for name in first:
            np.testing.assert_array_equal(first[name], second[name])


def test_warmup_then_run_is_one_run_also_after_pickling(reference):
    """``warmup(key)`` then ``run(post_warmup_state.rng_key)`` is ``run(key)``: same
    samples, same frozen R; an MCMC object pickled after warmup (its kernel drops its
    closures) and unpickled continues exactly the same way."""
    split = _mcmc(ALBP(product_model))
    split.warmup(random.key(0))
    scale = split.post_warmup_state.path_length
    restored = pickle.loads(pickle.dumps(split))
    for mcmc in (split, restored):
        mcmc.run(mcmc.post_warmup_state.rng_key, extra_fields=("accept_prob", "path_length"))
        _assert_same_run(reference, mcmc)
        np.testing.assert_array_equal(mcmc.get_extra_fields()["path_length"], scale)


def test_continuing_from_last_state_extends_the_chain(reference):
    """``post_warmup_state = last_state`` and ``run(last_state.rng_key)`` (here on an
    unpickled copy of a finished run): the next samples of the same chain, equal to the
    second half of a run twice as long."""
    num_samples = reference.num_samples
    long = _run(ALBP(product_model), random.key(0), num_samples=2 * num_samples)
    mcmc = pickle.loads(pickle.dumps(reference))
    mcmc.post_warmup_state = mcmc.last_state
    mcmc.run(mcmc.post_warmup_state.rng_key)
    np.testing.assert_array_equal(mcmc.get_samples()["x"], long.get_samples()["x"][num_samples:])
    # the step counter went on, so ALBP did not adapt again
    assert int(mcmc.last_state.i) == reference.num_warmup + 2 * num_samples


def test_pickled_used_kernel_runs_as_a_fresh_one(reference):
    """A kernel pickled after a run (with another key) behaves as a fresh kernel."""
    used = ALBP(product_model)
    _run(used, random.key(7))
    _assert_same_run(reference, _run(pickle.loads(pickle.dumps(used)), random.key(0)))
