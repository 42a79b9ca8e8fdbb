"""The smoke test of an installed wheel: run in a fresh virtual environment holding only the
wheel and its dependencies (``make wheel-check``), outside the checkout, it imports the
package and samples a small mixed model."""

import jax
import jax.numpy as jnp

import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS

import numpyro_discrete
from numpyro_discrete import LBPGibbs, diagnose


def model(y):
    p = numpyro.sample("p", dist.Beta(2.0, 2.0))
    with numpyro.plate("data", y.shape[0]):
        z = numpyro.sample("z", dist.Bernoulli(p))
        numpyro.sample("y", dist.Normal(2.0 * z, 1.0), obs=y)


if __name__ == "__main__":
    assert "site-packages" in numpyro_discrete.__file__, numpyro_discrete.__file__
    y = jnp.concatenate([jnp.full(30, 0.0), jnp.full(10, 2.0)])
    mcmc = MCMC(LBPGibbs(NUTS(model)), num_warmup=300, num_samples=1000, num_chains=2,
                chain_method="sequential", progress_bar=False)  # fmt: skip
    mcmc.run(jax.random.key(0), y)
    p = mcmc.get_samples()["p"]
    assert 0.1 < float(p.mean()) < 0.5, float(p.mean())
    print(f"numpyro_discrete {numpyro_discrete.__version__}: E[p] = {float(p.mean()):.3f}")
    print(diagnose(mcmc))
