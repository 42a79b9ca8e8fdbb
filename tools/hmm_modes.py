"""The local modes of the gallery HMM's marginal posterior, how often numpyro's start
falls into one, and how often ``LBPGibbs``'s start (the best of ``num_starts`` short
descents, :func:`~numpyro_discrete.model.chain_start.descended_start`) does.

The states summed out by numpyro's own enumeration (``hmm_model(..., enumerate_states=True)``,
the reference of :mod:`numpyro_discrete.gallery`), each of `--starts` points drawn as NUTS
draws its start (``init_to_uniform``, one key each) descends the potential energy with the
library's Adam (:func:`~numpyro_discrete.model.chain_start.descend`), `--short-steps` steps
(``LBPGibbs``'s descent) and then on to `--steps` in all. The lowest end point is the main
mode; an end point more than `--margin` nats above it is a local mode. The fraction of
starts that end in one is what any sampler of this marginal started that way meets, ours
(``CollapsedDraw``, whose inner NUTS moves the parameters on the same marginal) and NUTS
with enumeration alike. The starts are then taken in groups of `--group` (``LBPGibbs``'s
``num_starts``): the group's start of lowest potential after the short descent (or as
drawn, where lower) is the one ``LBPGibbs`` keeps, and the fraction of groups whose kept
start ends in a local mode is what its chains meet:

    python -m tools.hmm_modes --starts 64 --out /tmp/hmm_modes.json
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
from numpyro_discrete.model.chain_start import DESCENT_STEPS, descend


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--starts", type=int, default=64)
    parser.add_argument("--steps", type=int, default=1500, help="descent steps in all")
    parser.add_argument("--short-steps", type=int, default=DESCENT_STEPS, help="LBPGibbs's")
    parser.add_argument("--group", type=int, default=4, help="LBPGibbs's num_starts")
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
    shorts, short_values = jax.jit(
        jax.vmap(lambda x: descend(potential, x, args.short_steps, args.rate))
    )(flats)
    # the long descent restarts Adam's moments where the short one ends: it only tells
    # which basin the short one's end lies in
    rest = args.steps - args.short_steps
    ends, end_values = jax.jit(jax.vmap(lambda x: descend(potential, x, rest, args.rate)))(shorts)
    energy = np.asarray(end_values[:, -1])
    local = energy > energy.min() + args.margin
    # LBPGibbs's choice in each group: the lowest of the drawn and short-descended starts
    kept = np.minimum(np.asarray(short_values[:, 0]), np.asarray(short_values[:, -1]))
    kept = np.where(np.isfinite(kept), kept, np.inf)[: args.starts // args.group * args.group]
    groups = kept.reshape(-1, args.group)
    chosen = np.arange(groups.shape[0]) * args.group + groups.argmin(axis=1)
    kept_local = local[chosen]
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
    print(
        f"groups of {args.group} whose start of lowest potential after {args.short_steps} "
        f"steps is in a local mode: {int(kept_local.sum())} of {kept_local.size}"
    )
    if args.out is not None:
        result = {
            "settings": vars(args) | {"out": str(args.out)},
            "ends": rows,
            "kept_in_local_mode": [bool(v) for v in kept_local],
        }
        args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
