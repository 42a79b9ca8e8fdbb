"""The private numpyro names of ``numpyro_discrete/numpyro_internals.py``, one test per entry:
each fails loudly, naming the entry and what numpyro changed, when a numpyro release renames
or changes one of them (rather than a kernel failing somewhere far from the cause)."""

import inspect
import pickle

import numpy as np
import pytest

from jax import random
import jax.numpy as jnp

import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS
import numpyro.infer.gibbs
from numpyro.infer.gibbs import conditioned
import numpyro.infer.util

from numpyro_discrete import ALBP, LBP, LBPGibbs, LBPGibbsState, numpyro_internals
from numpyro_discrete.numpyro_internals import SAMPLE_FN_ATTRIBUTE

ENTRY = "numpyro_discrete/numpyro_internals.py, entry `{}`: "


def _fail(entry, problem):
    pytest.fail(ENTRY.format(entry) + problem + f" (numpyro {numpyro.__version__})")


def product_model():
    numpyro.sample("x", dist.Bernoulli(jnp.array([0.2, 0.5, 0.7])))


def test_prepare_model_for_potential():
    """``numpyro.infer.util._prepare_model_for_potential(model, model_trace, *, enum)``
    exists, with that signature, and prepares a model for its potential."""
    entry = "prepare_model_for_potential"
    function = getattr(numpyro.infer.util, "_prepare_model_for_potential", None)
    if function is None:
        _fail(entry, "numpyro.infer.util._prepare_model_for_potential no longer exists")
    parameters = list(inspect.signature(function).parameters.values())
    kinds = [(p.name, p.kind) for p in parameters]
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if (
        len(parameters) != 3
        or parameters[0].kind not in positional
        or parameters[1].kind not in positional
        or (parameters[2].name, parameters[2].kind) != ("enum", inspect.Parameter.KEYWORD_ONLY)
    ):
        _fail(
            entry,
            "numpyro.infer.util._prepare_model_for_potential no longer takes "
            f"(model, model_trace, *, enum); its parameters are {kinds}",
        )
    assert numpyro_internals.prepare_model_for_potential is function
    # the prepared model's log density is the model's own
    model_trace = numpyro.handlers.trace(numpyro.handlers.seed(product_model, 0)).get_trace()
    prepared = function(product_model, model_trace, enum=False)
    values = {"x": jnp.array([1, 0, 1])}
    got = numpyro.infer.util.log_density(prepared, (), {}, values)[0]
    expected = numpyro.infer.util.log_density(product_model, (), {}, values)[0]
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_mcmc_reinitialises_a_kernel_without_sample_fn():
    """numpyro's MCMC calls ``kernel.init`` again when the kernel's ``_sample_fn`` is
    ``None``: an unpickled MCMC (whose kernel dropped its compiled step) continues a run
    from ``post_warmup_state = last_state``."""
    entry = "SAMPLE_FN_ATTRIBUTE"
    source = inspect.getsource(MCMC)
    if f'"{SAMPLE_FN_ATTRIBUTE}"' not in source and f"'{SAMPLE_FN_ATTRIBUTE}'" not in source:
        _fail(entry, f"numpyro's MCMC no longer reads the kernel attribute {SAMPLE_FN_ATTRIBUTE}")
    mcmc = MCMC(LBP(product_model), num_warmup=10, num_samples=20, progress_bar=False)
    mcmc.run(random.key(0))
    restored = pickle.loads(pickle.dumps(mcmc))
    assert getattr(restored.sampler, SAMPLE_FN_ATTRIBUTE) is None  # dropped by pickling
    restored.post_warmup_state = restored.last_state
    try:
        restored.run(restored.post_warmup_state.rng_key)
    except RuntimeError as error:
        _fail(entry, f"numpyro's MCMC did not call `init` on a kernel whose "
              f"`{SAMPLE_FN_ATTRIBUTE}` is None before sampling: {error}")  # fmt: skip
    assert getattr(restored.sampler, SAMPLE_FN_ATTRIBUTE) is not None
    assert restored.get_samples()["x"].shape == (20, 3)
    assert int(restored.last_state.i) == 10 + 2 * 20  # the same chain, continued


def gibbs_model():
    numpyro.sample("z", dist.Bernoulli(0.3).expand([2]))
    numpyro.sample("mu", dist.Normal(0.0, 1.0))


def test_gibbs_state_class():
    """numpyro's ``Gibbs`` builds its state from the class attribute ``_state_cls``, which
    LBPGibbs sets to LBPGibbsState."""
    entry = "use_gibbs_state_class"
    gibbs = numpyro.infer.gibbs.Gibbs
    if not hasattr(gibbs, "_state_cls"):
        _fail(entry, "numpyro.infer.gibbs.Gibbs has no class attribute `_state_cls`")
    assert LBPGibbs._state_cls is LBPGibbsState
    state = LBPGibbs(NUTS(gibbs_model), discrete_kernel=ALBP(gibbs_model)).init(
        random.key(0), 10, None, (), {}
    )
    if not isinstance(state, LBPGibbsState):
        _fail(
            entry,
            f"numpyro's Gibbs.init built a {type(state).__name__}, not the class in "
            "`_state_cls` (LBPGibbsState)",
        )
    assert state.path_length == 1.0  # the LBPGibbsState shortcut reaches the ALBP state


def test_set_block_kernel():
    """numpyro's ``Gibbs`` runs the kernels of its tuple ``_kernels``: one set there is the
    one its sweep runs."""
    entry = "set_block_kernel"

    def mixed():
        numpyro.sample("c", dist.Bernoulli(0.3))
        numpyro.sample("x", dist.Normal(0.0, 1.0))

    kernel = LBPGibbs(NUTS(mixed))
    if not isinstance(getattr(kernel, "_kernels", None), tuple):
        _fail(entry, "numpyro.infer.gibbs.Gibbs no longer holds its kernels in `_kernels`")
    replacement = NUTS(mixed, step_size=0.123).wrap_model(conditioned)
    numpyro_internals.set_block_kernel(kernel, 1, replacement)
    if kernel.blocks[1][0] is not replacement:
        _fail(entry, "Gibbs.blocks no longer reads `_kernels`")
