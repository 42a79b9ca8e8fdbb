"""Long-run soak: ALBP on a 10^4-coordinate sparse Ising chain through the pure core ALBP step
(:func:`numpyro_discrete.core.path_length.build_kernel` and its adaptation),
in compiled chunks that keep no samples. Memory must stay flat across chunks and the
acceptance rate of each post-warmup chunk must stay at the same level.

Steps: 10^6 by default (the issue's length), ``SOAK_STEPS`` to change (a multiple of 20
chunks, each at least the 10,000 warmup steps). The run time is measured and printed; it is
the longest slow test, so it runs last in the slow tier's budget."""

import os
import time

import numpy as np
import pytest

import jax
from jax import lax, random
import jax.numpy as jnp

from numpyro_discrete.core import path_length, state
from numpyro_discrete.core.balancing import get_balancing
from numpyro_discrete.core.local_ratios import gradient_local_fn
from numpyro_discrete.core.neighbourhood import binary_neighbourhood

NUM_COORDS = 10_000
NUM_STEPS = int(os.environ.get("SOAK_STEPS", 1_000_000))
NUM_CHUNKS = 20
NUM_WARMUP = 10_000
TARGET_ACCEPT_PROB = 0.574


def _rss_mib():
    """Resident set size of this process, from /proc/self/status."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


@pytest.mark.slow
def test_albp_soak_memory_and_acceptance_stay_flat():
    # Ising chain, s = 2x - 1: log pi = sum_i a_i s_i + sum_i s_i s_{i+1}, a_i ~ U(-1, 1)
    field = random.uniform(random.key(0), (NUM_COORDS,), minval=-1.0, maxval=1.0)

    def log_pi(x):
        s = 2.0 * x - 1.0
        return field @ s + jnp.sum(s[1:] * s[:-1])

    local_fn = gradient_local_fn(log_pi, binary_neighbourhood)
    kernel = path_length.build_kernel(get_balancing("sqrt"), binary_neighbourhood, NUM_COORDS)
    chunk_size = NUM_STEPS // NUM_CHUNKS

    def step(i, carry):
        chain, adaptation, key, accept_sum = carry
        key, key_step = random.split(key)
        chain, info, _ = kernel(key_step, chain, local_fn, adaptation.path_length)
        adaptation = lax.cond(
            i < NUM_WARMUP,
            lambda: path_length.update(
                adaptation,
                i,
                info.accept_prob,
                NUM_WARMUP,
                TARGET_ACCEPT_PROB,
                NUM_COORDS,
            ),
            lambda: adaptation,
        )
        return chain, adaptation, key, accept_sum + info.accept_prob

    @jax.jit
    def chunk(start, carry):
        chain, adaptation, key, _ = carry
        zero = jnp.zeros((), field.dtype)
        return lax.fori_loop(start, start + chunk_size, step, (chain, adaptation, key, zero))

    one = jnp.ones((), field.dtype)
    initial = state.init(jnp.zeros(NUM_COORDS, jnp.int32), local_fn)
    carry = (initial, path_length.init(one), random.key(1), one)
    rss, accept, scales, seconds = [], [], [], []
    for c in range(NUM_CHUNKS):
        begin = time.perf_counter()
        carry = jax.block_until_ready(chunk(c * chunk_size, carry))
        seconds.append(time.perf_counter() - begin)
        rss.append(_rss_mib())
        accept.append(float(carry[3]) / chunk_size)
        scales.append(float(carry[1].path_length))
    print(
        f"\nsoak: {NUM_STEPS} steps, N={NUM_COORDS}, {sum(seconds):.1f} s "
        f"(first chunk, with compilation: {seconds[0]:.1f} s); frozen R={scales[-1]:.1f}; "
        f"acceptance per chunk {np.round(accept, 3).tolist()}; "
        f"RSS MiB {np.round(rss, 1).tolist()}"
    )
    # warmup ends inside the first chunk; from then on R is frozen
    assert NUM_WARMUP <= chunk_size
    assert len(set(scales)) == 1 and scales[0] > 1.0
    # memory: after the first chunk (compilation), no growth beyond allocator noise
    assert max(rss[1:]) - rss[1] < 20.0, rss
    # acceptance: near the target, and the same level in every post-warmup chunk
    post = np.array(accept[1:])
    assert np.all(np.abs(post - TARGET_ACCEPT_PROB) < 0.1), post
    assert np.ptp(post) < 0.03, post
    assert np.isfinite(float(carry[0].log_density))
