import jax

import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC

from numpyro_discrete import ALBP


def model(field, coupling):
    x = numpyro.sample("x", dist.Bernoulli(0.5).expand(field.shape))
    s = 2 * x - 1
    numpyro.factor("energy", (field * s).sum() + coupling * (s[1:] * s[:-1]).sum())


field = jax.random.normal(jax.random.key(1), (200,))
mcmc = MCMC(ALBP(model), num_warmup=1000, num_samples=2000, progress_bar=False)
mcmc.run(jax.random.key(0), field, 0.3, extra_fields=("accept_prob", "path_length", "num_changed"))

samples = mcmc.get_samples()["x"]
extra = mcmc.get_extra_fields()
print(samples.shape, samples.dtype)
print(f"acceptance {extra['accept_prob'].mean():.3f}")
print(f"R {extra['path_length'][-1]:.1f}")
print(f"coordinates changed per step {extra['num_changed'].mean():.1f}")
print("P(x_i = 1), first five sites:", ", ".join(f"{p:.2f}" for p in samples[:, :5].mean(0)))
