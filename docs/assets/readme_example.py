import logging

import jax
import jax.numpy as jnp

import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS

from numpyro_discrete import LBPGibbs, diagnose

logging.basicConfig(format="%(name)s: %(message)s")
logging.getLogger("numpyro_discrete").setLevel(logging.INFO)  # which kernel, and why


def model(y):  # a two-component Gaussian mixture with its labels as latent sites
    weights = numpyro.sample("weights", dist.Dirichlet(jnp.ones(2)))
    locs = numpyro.sample("locs", dist.Normal(0.0, 5.0).expand([2]).to_event(1))
    scale = numpyro.sample("scale", dist.HalfNormal(2.0))
    with numpyro.plate("data", y.shape[0]):
        z = numpyro.sample("z", dist.Categorical(weights))
        numpyro.sample("y", dist.Normal(locs[z], scale), obs=y)


key_data, key_mcmc = jax.random.split(jax.random.key(0))
y = jnp.concatenate([jnp.full(60, -2.0), jnp.full(140, 2.0)])
y = y + jax.random.normal(key_data, y.shape)

kernel = LBPGibbs(NUTS(model))  # the discrete kernel is chosen from the model's structure
mcmc = MCMC(kernel, num_warmup=500, num_samples=1000, num_chains=2, chain_method="sequential")
mcmc.run(key_mcmc, y)
samples = mcmc.get_samples(group_by_chain=True)
numpyro.diagnostics.print_summary({name: samples[name] for name in ("weights", "locs", "scale")})
print(diagnose(mcmc))  # per discrete site: R-hat, ESS, stuck chains (warns if they disagree)
