"""The gallery (``numpyro_discrete.gallery``): every model runs as numpyro runs it, its
reference is a proper distribution, and a short run of ``MCMC(LBPGibbs(NUTS(model)))``
(the one line a user writes; ``LBPGibbs`` picks the discrete kernel) agrees with the
reference on the label-invariant summaries at the ``"exact"`` size.

Tolerance: every coordinate of every summary within 5 combined standard errors (the
sampler's ESS-based Monte Carlo error and, for sampled references, theirs), plus the
reference's stated deterministic error, plus 0.01 absolute (for coordinates whose draws
never moved, where the ESS-based error is zero)."""

import numpy as np
import pytest

from jax import random

from numpyro.infer import MCMC, NUTS, Predictive
from numpyro.infer.util import log_density

from numpyro_discrete import ALBP, LBPGibbs
from numpyro_discrete.gallery import GALLERY, SIZES, batch_summaries, enumerate_sites, mcse
from numpyro_discrete.gallery.networks import rbm_model

NUM_SE = 5.0
ABSOLUTE_SLACK = 0.01
#: ``(num_warmup, num_samples)`` of the sampler's 2 vectorized chains, per model.
RUNS = {
    "mixture": (500, 2000),
    "hmm": (300, 1000),
    "fhmm": (300, 1000),
    "change_point": (300, 2000),
    "variable_selection": (500, 2000),
    "n_mixture": (500, 2000),
    "capture_recapture": (300, 2000),
    "sbm": (300, 2000),
    "potts_denoising": (300, 2000),
    "ising": (300, 2000),
    "rbm": (300, 2000),
}


@pytest.mark.parametrize("name", list(GALLERY))
def test_entry_runs_and_its_reference_is_a_distribution(name):
    entry = GALLERY[name]
    assert entry.name == name and entry.description and entry.citations
    for size in SIZES:
        data = entry.simulate(0, size)
        draws = Predictive(entry.model, num_samples=2)(random.key(0), *data.args, **data.kwargs)
        assert draws, name
    # the simulator is a function of its seed
    first, again = entry.simulate(3, "exact"), entry.simulate(3, "exact")
    np.testing.assert_array_equal(np.asarray(first.args[0]), np.asarray(again.args[0]))
    with pytest.raises(ValueError, match="size"):
        entry.simulate(0, "huge")


def test_fhmm_positive_weights_fold_the_prior():
    """``positive_weights`` (``examples/fhmm.py --positive-weights``) folds the weights'
    prior onto ``w > 0``."""
    y, num_chains = GALLERY["fhmm"].simulate(0, "example").args
    for positive in (True, False):
        draws = Predictive(GALLERY["fhmm"].model, num_samples=200)(
            random.key(2), y, num_chains, positive_weights=positive
        )
        assert np.all(np.asarray(draws["w"]) > 0) == positive


@pytest.mark.parametrize(
    "name", [n for n in GALLERY if GALLERY[n].reference_kind != "enumerated NUTS"]
)
def test_exact_reference_is_a_proper_distribution(name):
    entry = GALLERY[name]
    reference = entry.reference(entry.simulate(0, "exact"))
    probs = reference.probs
    assert probs is not None and np.all(probs >= 0)
    np.testing.assert_allclose(probs.sum(), 1.0, rtol=1e-9)
    for key, mean in reference.mean.items():
        assert np.all(np.isfinite(mean)), key
        assert not np.any(reference.se[key]), key
    assert 0 <= reference.error < 1e-3 and reference.method


def test_rbm_reference_equals_the_enumeration_of_visible_and_hidden_units():
    """The closed form (hidden units summed out) against numpyro's ``log_density`` of every
    joint ``(v, h)``."""
    entry = GALLERY["rbm"]
    data = entry.simulate(0, "exact")
    reference = entry.reference(data)
    weights = np.asarray(data.args[0])
    shapes = {"v": ((weights.shape[1],), 2), "h": ((weights.shape[0],), 2)}
    states, log_joint = enumerate_sites(rbm_model, data.args, {}, shapes)
    probs = np.exp(log_joint - log_joint.max())
    probs /= probs.sum()
    for site in ("v", "h"):
        np.testing.assert_allclose(probs @ states[site], reference.mean[site], atol=1e-5)
    # and numpyro's log density is the model's: one state by hand
    one = {k: v[5] for k, v in states.items()}
    by_hand = float(log_density(rbm_model, data.args, {}, one)[0])
    np.testing.assert_allclose(by_hand, log_joint[5], rtol=1e-5)


def check_against_reference(name, kernel):
    """Two vectorized chains of `kernel` at the ``"exact"`` size of gallery model `name`
    (:data:`RUNS`) agree with its reference on every summary."""
    entry = GALLERY[name]
    data = entry.simulate(0, "exact")
    reference = entry.reference(data)
    num_warmup, num_samples = RUNS[name]
    mcmc = MCMC(
        kernel,
        num_warmup=num_warmup,
        num_samples=num_samples,
        num_chains=2,
        chain_method="vectorized",
        progress_bar=False,
    )
    mcmc.run(random.key(1), *data.args, **data.kwargs)
    summaries = batch_summaries(entry, mcmc.get_samples(group_by_chain=True), data, 2)
    for key, draws in summaries.items():
        estimate = draws.mean((0, 1))
        se = np.sqrt(mcse(draws) ** 2 + reference.se[key] ** 2)
        error = np.abs(estimate - reference.mean[key])
        bound = NUM_SE * se + reference.error + ABSOLUTE_SLACK
        assert np.all(error <= bound), (
            f"{name}.{key}: error {error}, bound {bound}, estimate {estimate}, "
            f"reference {reference.mean[key]} ({reference.method})"
        )


# 20-60 s per model on 2 CPU cores: the slow tier
@pytest.mark.slow
@pytest.mark.parametrize("name", list(GALLERY))
def test_lbp_gibbs_matches_the_reference(name):
    model = GALLERY[name].model
    check_against_reference(name, LBPGibbs(NUTS(model)))


@pytest.mark.slow
def test_albp_auto_weights_are_exact_where_gradients_mislead():
    """Spike and slab: the Gaussian likelihood is far from affine in ``gamma`` (gradient
    ratios off by tens of nats), so ``ALBP``'s ``weights="auto"`` takes exact ratios; with
    gradient ratios it accepted 0.5% of its proposals and its inclusion probabilities were
    off by up to 0.16 (issue 30)."""
    model = GALLERY["variable_selection"].model
    kernel = LBPGibbs(NUTS(model), discrete_kernel=ALBP(model))
    check_against_reference("variable_selection", kernel)
    assert kernel.discrete_kernel.weights_mode == {"gamma": "exact"}
