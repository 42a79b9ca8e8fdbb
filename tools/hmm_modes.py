"""The local modes of the gallery HMM's marginal posterior, and how often numpyro's start
falls into one.

The states summed out by numpyro's own enumeration (``hmm_model(..., enumerate_states=True)``,
the reference of :mod:`numpyro_discrete.gallery`), each of `--starts` points drawn as NUTS
draws its start (``init_to_uniform``, one key each) descends the potential energy with Adam
(`--steps` steps). The lowest end point is the main mode; an end point more than
`--margin` nats above it is a local mode. The fraction of starts that end in one is what
any sampler of this marginal started that way meets, ours (``CollapsedDraw``, whose inner
NUTS moves the parameters on the same marginal) and NUTS with enumeration alike:

    python -m tools.hmm_modes --starts 64 --out tools/results/hmm_modes.json
"""

import argparse
import json
from pathlib import Path

import numpy as np

import jax
from jax import random
from jax.flatten_util import ravel_pytree
import jax.numpy as jnp

from numpyro.handlers import seed
from numpyro.infer import init_to_uniform
from numpyro.infer.util import constrain_fn, initialize_model

from numpyro_discrete.gallery import sequences


def descend(potential, flat: jax.Array, steps: int, rate: float) -> jax.Array:
    """Adam on `potential` from `flat` (non-finite gradient entries skipped)."""

    def step(carry, i):
        x, m, v = carry
        g = jax.grad(potential)(x)
        g = jnp.where(jnp.isfinite(g), g, 0.0)
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        x = x - rate * (m / (1 - 0.9 ** (i + 1))) / (jnp.sqrt(v / (1 - 0.999 ** (i + 1))) + 1e-8)
        return (x, m, v), None

    (x, _, _), _ = jax.lax.scan(step, (flat, 0 * flat, 0 * flat), jnp.arange(steps))
    return x


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--starts", type=int, default=64)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--rate", type=float, default=0.05)
    parser.add_argument("--margin", type=float, default=5.0, help="nats above the lowest end")
    parser.add_argument("--seed", type=int, default=0, help="the data's seed")
    parser.add_argument("--out", type=Path, default=None, help="JSON of the end points")
    args = parser.parse_args()

    data = sequences.hmm_data(args.seed, "example")
    model_args = (*data.args, True)  # the states enumerated by numpyro
    starts = [
        initialize_model(
            key, sequences.hmm_model, model_args=model_args, init_strategy=init_to_uniform
        )
        for key in random.split(random.key(1), args.starts)
    ]
    potential_fn = starts[0].potential_fn
    _, unravel = ravel_pytree(starts[0].param_info.z)

    def potential(x: jax.Array) -> jax.Array:
        return potential_fn(unravel(x))

    flats = jnp.stack([ravel_pytree(s.param_info.z)[0] for s in starts])
    ends = jax.jit(jax.vmap(lambda x: descend(potential, x, args.steps, args.rate)))(flats)
    energy = np.asarray(jax.vmap(potential)(ends))
    local = energy > energy.min() + args.margin
    rows = []
    for x, u, is_local in zip(ends, energy, local, strict=True):
        values = constrain_fn(seed(sequences.hmm_model, 0), model_args, {}, unravel(x))
        rows.append(
            {
                "potential": float(u),
                "local": bool(is_local),
                "locs": [round(float(v), 3) for v in np.asarray(values["locs"])],
                "sigma": round(float(values["sigma"]), 3),
            }
        )
    print(
        f"{args.starts} starts, {args.steps} Adam steps each; lowest potential {energy.min():.1f}"
    )
    for potential_value in sorted({round(r["potential"]) for r in rows}):
        group = [r for r in rows if round(r["potential"]) == potential_value]
        print(
            f"  potential {potential_value}: {len(group)} starts, "
            f"locs {group[0]['locs']}, sigma {group[0]['sigma']}"
        )
    print(f"fraction of starts in a local mode: {local.mean():.3f}")
    if args.out is not None:
        args.out.write_text(
            json.dumps({"settings": vars(args) | {"out": str(args.out)}, "ends": rows}, indent=1)
        )


if __name__ == "__main__":
    main()
