"""Every user error is raised early, names the site or argument, and says what to do: the
misuses of docs/errors.md (each row a case below, under the same id), and the argument
errors of ACS, DMALA and LBPGibbs."""

from collections.abc import Callable
from pathlib import Path
import re
from typing import Any, NamedTuple

import pytest

import jax
from jax import random
import jax.numpy as jnp

import numpyro
import numpyro.distributions as dist
from numpyro.infer import HMCECS, MCMC, NUTS

from numpyro_discrete import (
    ACS,
    ALBP,
    DMALA,
    LBP,
    BlockGibbs,
    LBPGibbs,
    ModelError,
    SiteSupport,
)

from helpers import beta_bernoulli_model

DOCS = Path(__file__).parent.parent / "docs" / "errors.md"
PATH_LENGTH = "`path_length` must be an integer >= 1 (the number of coordinates changed per step)"


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


def unreachable_mixed_model():
    numpyro.sample("mu", dist.Normal(0.0, 1.0))
    x = numpyro.sample("x", dist.Bernoulli(0.5).expand([3]))
    numpyro.factor("more_than_three", jnp.where(jnp.sum(x) > 3, 0.0, -jnp.inf))


def row_sum_model():
    x = numpyro.sample("x", dist.Bernoulli(0.5).expand([2, 4]))
    numpyro.factor("rows", jnp.sum(x, axis=1) ** 2)  # a whole row in one term


def zero_size_model():
    numpyro.sample("e", dist.Bernoulli(0.5).expand([0]))


def latent_bound_model():
    n = numpyro.sample("n", dist.Binomial(4, 0.5))
    numpyro.sample("k", dist.Binomial(n, 0.5))


def argument_bound_model(counts):
    numpyro.sample("k", dist.Binomial(counts.astype(jnp.int32), 0.5))


def _init_under_jit(kernel):
    """`init` traced with the model's arguments as inputs (a user's own `jit`)."""
    jax.jit(lambda counts: kernel.init(random.key(0), 2, None, (counts,), {}).z)(jnp.ones(2))


def subsampled_model():
    z = numpyro.sample("z", dist.Bernoulli(0.5))
    with numpyro.plate("data", 10, subsample_size=5):
        numpyro.sample("y", dist.Normal(z, 1.0), obs=jnp.zeros(5))


def _init(kernel, init_params=None):
    return _run(kernel, init_params=init_params)


def _vectorized(kernel, init_params=None):
    mcmc = MCMC(
        kernel,
        num_warmup=2,
        num_samples=2,
        num_chains=2,
        chain_method="vectorized",
        progress_bar=False,
    )
    mcmc.run(random.key(0), init_params=init_params)


def _collect(kernel, field):
    mcmc = MCMC(kernel, num_warmup=1000, num_samples=2, progress_bar=False)
    mcmc.run(random.key(0), extra_fields=(field,))


def _sum_x(z):
    return jnp.sum(z["x"])


X3 = {"x": jnp.zeros(3, jnp.int32)}


class Case(NamedTuple):
    """A misuse: `trigger` commits it; it must raise `error` with `message` in its text.
    Each case is a row of docs/errors.md, under the same id."""

    id: str
    trigger: Callable[[], Any]
    error: type
    message: str


# one case per row of docs/errors.md, in its order: id, trigger, error, message
# fmt: off
CASES = [
    # --- the model or potential -------------------------------------------------------
    Case("model-not-callable", lambda: LBP("model"), TypeError,
         "LBP: `model` must be a numpyro model function, got str 'model'"),
    Case("potential-not-callable", lambda: ALBP(potential_fn=3), TypeError,
         "ALBP: `potential_fn` must be a function of a dict of site values returning the "
         "potential energy, got int 3"),
    Case("model-and-potential", lambda: LBP(binary_model, potential_fn=lambda z: 0.0),
         ValueError, "LBP needs exactly one of `model` or `potential_fn`"),
    Case("neither-model-nor-potential", lambda: LBP(), ValueError, "LBP needs exactly one of"),
    Case("no-discrete-sites", lambda: _init(ALBP(continuous_model)), ModelError,
         "ALBP: found no discrete latent sites in the model"),
    Case("continuous-sites", lambda: _init(ALBP(mixed_model)), ModelError,
         "continuous latent sites 'w' (Normal). Sample them with NUTS beside a discrete "
         "kernel: `MCMC(LBPGibbs(NUTS(model)))`"),
    Case("support-bound-from-latent", lambda: _init(ALBP(latent_bound_model)), ModelError,
         "ALBP: site 'k' (BinomialProbs) has support bounds computed from the value of latent "
         "site(s) ['n']; the kernel fixes each site's support at `init`"),
    Case("support-bound-from-traced-argument",
         lambda: _init_under_jit(ALBP(argument_bound_model)), ModelError,
         "ALBP: site 'k' (BinomialProbs) has support bounds computed from a model argument "
         "that is traced where the kernel's `init` runs"),
    Case("multivariate-discrete-site", lambda: _init(LBP(multinomial_model)), ModelError,
         "LBP: site 'm' (MultinomialProbs with support Multinomial()) is a multivariate "
         "discrete distribution (event shape (3,))"),
    Case("only-empty-sites", lambda: _init(LBP(zero_size_model)), ModelError,
         "LBP: the discrete sites have no coordinates (site shapes {'e': (0,)})"),
    Case("not-differentiable", lambda: _init(LBP(indexing_model, weights="gradient")),
         ModelError, "cannot be differentiated in the values of site 'x'"),
    Case("not-differentiable-ordinal",
         lambda: _init(LBP(index_by_poisson_model, weights="gradient")),
         ModelError, "cannot be differentiated in the values of site 'n'"),
    Case("infinite-potential-at-init", lambda: _init(LBP(impossible_start_model), X3),
         ModelError, "the potential energy is [inf] at the initial values of sites ['x']"),
    Case("unreachable-start-lbp-gibbs", lambda: _run(LBPGibbs(NUTS(unreachable_mixed_model))),
         ModelError, "the potential energy is [inf] at the initial values of sites ['x']"),
    Case("nan-potential-at-init",
         lambda: _init(ALBP(potential_fn=lambda z: jnp.nan * jnp.sum(z["x"])), X3),
         ModelError, "the potential energy is [nan]"),
    Case("non-finite-start-vectorized",
         lambda: _vectorized(ALBP(potential_fn=lambda z: jnp.log(jnp.sum(z["x"]) - 1.0)),
                             {"x": jnp.array([[1, 1, 1], [0, 0, 0]], jnp.int32)}),
         ModelError, "potential energy is [0.693"),
    # --- init_params ------------------------------------------------------------------
    Case("potential-without-init-params", lambda: _init(ALBP(potential_fn=_sum_x)),
         ModelError, "ALBP: with `potential_fn`, the kernel needs `init_params`"),
    Case("init-params-unknown-site", lambda: _init(LBP(binary_model), {"y": X3["x"]}),
         ModelError, "LBP: `init_params` has sites ['y'] that the kernel does not sample"),
    Case("init-params-shape", lambda: _init(LBP(binary_model), {"x": jnp.zeros(4, jnp.int32)}),
         ModelError, "`init_params['x']` has shape (4,), but site 'x' has shape (3,)"),
    Case("init-params-outside-support",
         lambda: _init(LBP(poisson_model), {"n": jnp.array([1, -1])}), ModelError,
         "`init_params` has values outside the support of sites 'n' (ordinal[0, inf])"),
    Case("potential-init-params-not-binary",
         lambda: _init(ALBP(potential_fn=_sum_x), {"x": jnp.array([0, 2, 1])}), ModelError,
         "`init_params` has values outside the support of sites 'x' (binary(2 values)). "
         "With `potential_fn`, the kernel treats sites as binary unless `supports` says otherwise"),
    Case("init-params-no-chain-axis", lambda: _vectorized(ALBP(potential_fn=_sum_x), X3),
         ValueError, "`init_params` must have the same leading dimension as `num_chains`"),
    # --- arguments --------------------------------------------------------------------
    Case("path-length-above-coordinates", lambda: _init(LBP(binary_model, path_length=4)),
         ValueError, "`path_length=4` exceeds the number of discrete coordinates (3)"),
    Case("path-length-zero", lambda: LBP(binary_model, path_length=0), ValueError, PATH_LENGTH),
    Case("path-length-float", lambda: LBP(binary_model, path_length=2.5), ValueError,
         PATH_LENGTH),
    Case("unknown-balancing", lambda: LBP(binary_model, balancing="gaussian"), ValueError,
         "Unknown balancing function 'gaussian'; choose one of ['barker', 'sqrt']"),
    Case("unknown-weights", lambda: ALBP(binary_model, weights="hessian"), ValueError,
         "ALBP: unknown `weights='hessian'`; choose one of ['auto', 'gradient', 'exact']"),
    Case("unknown-weights-per-site", lambda: LBP(binary_model, weights={"x": "taylor"}),
         ValueError, "unknown `weights={'x': 'taylor'}`"),
    Case("weights-unknown-site", lambda: _init(LBP(binary_model, weights={"y": "exact"})),
         ModelError, "LBP: `weights` names sites ['y'] that the kernel does not sample; its "
         "sites are ['x']"),
    Case("ordinal-window", lambda: LBP(binary_model, ordinal_window=0), ValueError,
         "`ordinal_window` must be None (moves in the units of each site) or an integer >= 1 "
         "(the largest change of an ordinal coordinate in one move), got 0"),
    Case("supports-with-model", lambda: LBP(binary_model, supports={"x": SiteSupport.binary()}),
         ValueError, "`supports` is for `potential_fn` only"),
    Case("supports-not-site-support", lambda: LBP(potential_fn=lambda z: 0.0, supports={"x": 3}),
         ValueError, "`supports` must map site names to `SiteSupport` objects"),
    Case("block-axis-not-a-chain", lambda: _init(BlockGibbs(row_sum_model, blocks={"x": 1})),
         ValueError, "BlockGibbs: the lines of site 'x' along axis 1 are not chains"),
    Case("block-unknown-site", lambda: _init(BlockGibbs(binary_model, blocks={"y": 0})),
         ValueError, "BlockGibbs: blocks were stated for ['y'], which are not discrete latent "
         "sites"),
    Case("block-unbounded-site", lambda: _init(BlockGibbs(poisson_model)), ValueError,
         "chain blocks draw from at most 64 values per coordinate. Use ChromaticGibbs or ALBP"),
    Case("supports-unknown-site",
         lambda: _init(ALBP(potential_fn=_sum_x, supports={"y": SiteSupport.binary()}), X3),
         ModelError, "ALBP: `supports` names sites ['y'] that are not in `init_params`"),
    Case("categorical-one-category", lambda: SiteSupport.categorical(1), ValueError,
         "needs an integer `num_categories >= 2`, got 1"),
    Case("ordinal-float-bounds", lambda: SiteSupport.ordinal(0.5, 3), ValueError,
         "needs integer bounds, got lower=0.5"),
    Case("ordinal-empty", lambda: SiteSupport.ordinal(3, 1), ValueError,
         "`upper=1` is below `lower=3`"),
    Case("target-accept-prob-range", lambda: ALBP(binary_model, target_accept_prob=1.0),
         ValueError, "`target_accept_prob` must lie in (0, 1), got 1.0"),
    Case("target-accept-prob-negative", lambda: ALBP(binary_model, target_accept_prob=-0.2),
         ValueError, "`target_accept_prob` must lie in (0, 1), got -0.2"),
    Case("target-accept-prob-type", lambda: ALBP(binary_model, target_accept_prob="high"),
         ValueError, "`target_accept_prob` must lie in (0, 1), got 'high'"),
    Case("init-path-length-below-one", lambda: ALBP(binary_model, init_path_length=0.5),
         ValueError, "`init_path_length` must be >= 1, got 0.5"),
    Case("init-path-length-type", lambda: ALBP(binary_model, init_path_length="2"),
         ValueError, "`init_path_length` must be >= 1, got '2'"),
    Case("max-path-length", lambda: ALBP(binary_model, max_path_length=0), ValueError,
         "`max_path_length` must be None or an integer >= 1"),
    Case("init-above-max-path-length",
         lambda: ALBP(binary_model, init_path_length=5, max_path_length=3), ValueError,
         "`init_path_length=5` exceeds `max_path_length=3`"),
    # --- protocol and composition -----------------------------------------------------
    Case("sample-before-init", lambda: LBP(binary_model).sample(None, (), None), RuntimeError,
         "LBP: call `init` before `sample`"),
    Case("wrap-potential-fn", lambda: LBP(potential_fn=lambda z: 0.0).wrap_model(lambda m: m),
         ValueError, "LBP built from `potential_fn` has no model to wrap"),
    Case("lbp-gibbs-inner-kernel", lambda: LBPGibbs(ALBP(mixed_model)), ValueError,
         "LBPGibbs: `inner_kernel` must be numpyro's HMC or NUTS"),
    Case("lbp-gibbs-random-walk", lambda: LBPGibbs(NUTS(mixed_model), random_walk=True),
         ValueError, "LBPGibbs: `random_walk=True` (DiscreteHMCGibbs's uniform proposals over "
         "a site's values) is not available"),
    Case("lbp-gibbs-modified-with-discrete-kernel",
         lambda: LBPGibbs(NUTS(mixed_model), discrete_kernel=LBP(mixed_model), modified=True),
         ValueError, "with `discrete_kernel` given (LBP), drop `modified`"),
    Case("lbp-gibbs-num-discrete-updates",
         lambda: LBPGibbs(NUTS(mixed_model), num_discrete_updates=20), ValueError,
         "LBPGibbs: `num_discrete_updates=20` (MixedHMC's one-site updates inside each HMC "
         "trajectory) has no LBPGibbs equivalent"),
    Case("lbp-gibbs-hmcecs", lambda: LBPGibbs(HMCECS(NUTS(mixed_model))), ValueError,
         "LBPGibbs: `inner_kernel` is HMCECS, whose subsampled likelihood LBPGibbs does not "
         "support"),
    Case("lbp-gibbs-subsample", lambda: _init(LBPGibbs(NUTS(subsampled_model))), ValueError,
         "LBPGibbs: the model subsamples its data (plates ['data'] have a `subsample_size`)"),
    Case("lbp-gibbs-hmc-state-discrete-only",
         lambda: _collect(LBPGibbs(NUTS(discrete_only)), "hmc_state.accept_prob"),
         ValueError, "LBPGibbsState.hmc_state: the model has no continuous latent sites"),
    Case("lbp-gibbs-acs-path-length",
         lambda: _collect(
             LBPGibbs(NUTS(mixed_model), discrete_kernel=ACS(mixed_model, cycle_length=2)),
             "path_length",
         ),
         ValueError,
         "LBPGibbsState.path_length: the discrete kernel's state (ACSState) has no field "
         "`path_length`"),
]
# fmt: on


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_error(case):
    with pytest.raises(case.error, match=re.escape(case.message)):
        case.trigger()


def _docs_rows():
    """``id -> (error type name, message)`` from the table of docs/errors.md."""
    rows = {}
    for line in DOCS.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].startswith("`") or cells[0].startswith("``"):
            continue
        case_id, _, error, message = cells
        assert message.startswith("`` ") and message.endswith(" ``"), line
        rows[case_id.strip("`")] = (error.strip("`"), message[3:-3])
    return rows


def test_docs_table_matches_the_tested_cases():
    """Every row of docs/errors.md is a case above, with the same error type and message
    (which `test_error` checks is raised), and every case has its row."""
    assert _docs_rows() == {case.id: (case.error.__name__, case.message) for case in CASES}


def test_even_path_length_on_binary_sites_warns():
    """LBP-2 flips exactly two bits per step: sum(x) mod 2 is invariant, so the warning is
    not a formality: a chain started at zeros only ever visits even-weight states."""
    with pytest.warns(UserWarning, match="never changes the parity"):
        mcmc = _run(LBP(binary_model, path_length=2))
    mcmc = MCMC(LBP(binary_model, path_length=2), num_warmup=0, num_samples=200, progress_bar=False)
    with pytest.warns(UserWarning):
        mcmc.run(random.key(1), init_params={"x": jnp.zeros(3, jnp.int32)})
    assert set(map(int, mcmc.get_samples()["x"].sum(1) % 2)) == {0}


# --- ACS and DMALA --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"target_accept_prob": 1.0}, "target_accept_prob"),
        ({"cycle_length": 0}, "cycle_length"),
        ({"balancing_min": 0.9, "balancing_max": 0.6}, "balancing_min <= balancing_max"),
        ({"balancing_max": 1.5}, "balancing_max"),
        ({"step_size_ceil": 0.01}, "step_size_floor"),
        ({"step_size_floor": -1.0}, "step_size_floor"),
        ({"zeta": 1.0}, "zeta"),
        ({"tune_fraction": 0.0}, "tune_fraction"),
        ({"step_size_max": 0.1, "step_size_min": 1.0}, "exceeds"),
        ({"step_size_max": float("nan")}, "step_size_max"),
        ({"ordinal_window": 0}, "ordinal_window"),
        ({"weights": "fast"}, "weights"),
    ],
)
def test_acs_argument_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ACS(binary_model, **kwargs)


@pytest.mark.parametrize(
    "kwargs, match",
    [({"step_size": 0.0}, "step_size"), ({"balancing": 0.0}, "balancing")],
)
def test_dmala_argument_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        DMALA(binary_model, **kwargs)


def test_acs_short_warmup_error_names_the_fix():
    """ACS tunes in up to half of warmup; both step-size searches need 12 steps."""
    mcmc = MCMC(ACS(binary_model), num_warmup=20, num_samples=10, progress_bar=False)
    with pytest.raises(
        ValueError, match=r"here in 10 steps .* needs at least 12\. Use `num_warmup >= 24`"
    ):
        mcmc.run(random.key(0))
    given = ACS(binary_model, step_size_max=1.0, step_size_min=0.1)
    MCMC(given, num_warmup=20, num_samples=10, progress_bar=False).run(random.key(0))


def test_acs_no_discrete_sites_error():
    mcmc = MCMC(ACS(continuous_model), num_warmup=1000, num_samples=10, progress_bar=False)
    with pytest.raises(ValueError, match="no discrete latent sites"):
        mcmc.run(random.key(0))


# --- LBPGibbs -------------------------------------------------------------------------------


def continuous_only(y):
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)


def discrete_only():
    numpyro.sample("z", dist.Bernoulli(0.3).expand([4]))


def _gibbs_run(kernel, *args, **kwargs):
    mcmc = MCMC(kernel, num_warmup=100, num_samples=200, progress_bar=False, **kwargs)
    mcmc.run(random.key(0), *args)


def test_lbp_gibbs_errors():
    model = beta_bernoulli_model
    with pytest.raises(ValueError, match=r"must be numpyro's HMC or NUTS.*LBPGibbs\(NUTS"):
        LBPGibbs(ALBP(model))
    with pytest.raises(ValueError, match=r"built from `potential_fn`.*NUTS\(model\)"):
        LBPGibbs(NUTS(potential_fn=lambda z: jnp.sum(z["a"] ** 2)))
    with pytest.raises(ValueError, match="same model callable"):
        LBPGibbs(NUTS(model), discrete_kernel=ALBP(discrete_only))
    with pytest.raises(ValueError, match="discrete MCMCKernel"):
        LBPGibbs(NUTS(model), discrete_kernel=NUTS(model))
    with pytest.raises(ValueError, match=r"no discrete latent sites.*\['mu'\].*NUTS\(model\)"):
        _gibbs_run(LBPGibbs(NUTS(continuous_only)), 1.0)
    with pytest.raises(ValueError, match=r"`num_discrete_steps` must be >= 1.*got 0"):
        LBPGibbs(NUTS(model), num_discrete_steps=0)
    with pytest.raises(TypeError, match=r"`num_discrete_steps` must be a positive int"):
        LBPGibbs(NUTS(model), num_discrete_steps=2.5)
    with pytest.raises(TypeError, match=r"LBPGibbs: `modified` must be a bool"):
        LBPGibbs(NUTS(model), modified="yes")
