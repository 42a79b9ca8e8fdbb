"""Helpers shared by the tests: enumerated spaces and targets, exact transition matrices,
statistical checks (chi-square, total variation, Monte Carlo standard errors) and the small
factorial HMM of the LBPGibbs tests. Tests never import ``benchmarks``."""

import itertools
import warnings

import numpy as np
from scipy import stats

import jax
from jax import random
import jax.numpy as jnp

import numpyro
from numpyro.diagnostics import effective_sample_size
import numpyro.distributions as dist
from numpyro.infer import MCMC

from numpyro_discrete.core import block_gibbs, chromatic, offset_sweep, site_scan, table_sweep
from numpyro_discrete.core.local_ratios import coloured_ratios, exact_local_fn
from numpyro_discrete.core.neighbourhood import CoordinateSupports, SupportKind

# --- enumerated spaces ----------------------------------------------------------------------


def all_binary_states(num_coords: int) -> np.ndarray:
    """All ``2^N`` binary vectors, row ``k`` is the binary expansion of ``k``."""
    return np.array(list(itertools.product([0, 1], repeat=num_coords)), dtype=np.int32)


def state_index(states: jnp.ndarray) -> jnp.ndarray:
    """Inverse of :func:`all_binary_states` (row-major binary number)."""
    num_coords = states.shape[-1]
    powers = 2 ** jnp.arange(num_coords - 1, -1, -1)
    return jnp.sum(states * powers, axis=-1)


def state_lookup(states: np.ndarray):
    """Map each row of `ys` to its row in the enumeration `states`, through a dict."""
    lookup = {tuple(s): i for i, s in enumerate(np.asarray(states))}
    return lambda ys: np.array([lookup[tuple(y)] for y in np.asarray(ys)], dtype=np.int64)


# tiny spaces, per coordinate (kind, num_categories, lower, upper)
_B, _C3 = (SupportKind.BINARY, 2, 0, 1), (SupportKind.CATEGORICAL, 3, 0, 2)
_ORD = SupportKind.ORDINAL
SPACES = {
    "binary": [_B] * 4,
    # K = 3 categorical coordinates beside a binary one
    "categorical": [_C3, _B, _C3],
    # ordinal coordinates whose windows hit the support boundaries
    "ordinal": [(_ORD, 0, 0, 3), (_ORD, 0, -1, 1), (_ORD, 0, 2, 4)],
    "mixed": [_C3, _B, (_ORD, 0, 0, 3)],
    # ordinal coordinates moved by a ladder of distances (LADDER_SCALES) that skips values
    "ladder": [(_ORD, 0, 0, 9), (_ORD, 0, -2, 4)],
}
LADDER_SCALES = np.array([2.5, 4.0])


def coordinate_space(name: str) -> tuple[CoordinateSupports, np.ndarray]:
    """The supports of the space `name` of :data:`SPACES` and all its states, row-major."""
    columns = zip(*SPACES[name], strict=True)
    supports = CoordinateSupports(*(np.array(column, np.int32) for column in columns))
    values = [np.arange(lo, hi + 1) for lo, hi in zip(supports.lower, supports.upper, strict=True)]
    return supports, np.array(list(itertools.product(*values)), dtype=np.int32)


# --- random targets -------------------------------------------------------------------------


def random_binary_target(num_coords: int, seed: int, num_hidden: int = 3):
    """
    A random log density on ``{0, 1}^N`` with pairwise couplings and a non-linear
    (RBM-like softplus) term, so that gradient-based local ratios are only approximate.
    Returns ``log_pi(x)`` accepting int or float vectors.
    """
    rng = np.random.default_rng(seed)
    field = rng.normal(0.0, 1.0, num_coords)
    coupling = np.triu(rng.normal(0.0, 0.5, (num_coords, num_coords)), 1)
    weights = rng.normal(0.0, 1.0, (num_hidden, num_coords))
    bias = rng.normal(0.0, 1.0, num_hidden)

    def log_pi(x):
        x = jnp.asarray(x, jnp.result_type(float))
        pairwise = x @ jnp.asarray(coupling) @ x
        hidden = jnp.sum(jnp.logaddexp(0.0, jnp.asarray(weights) @ x + jnp.asarray(bias)))
        return jnp.asarray(field) @ x + pairwise + hidden

    return log_pi


def random_mixed_target(num_coords: int, seed: int):
    """A log density of integer vectors with pairwise and softplus terms in the values
    (differentiable, so that gradient weights apply, and not affine, so that they are only
    approximate) plus a per-coordinate table read at the value (a value used as an index,
    invisible to the gradient)."""
    rng = np.random.default_rng(seed)
    field = jnp.asarray(rng.normal(0.0, 1.0, num_coords))
    coupling = jnp.asarray(np.triu(rng.normal(0.0, 0.4, (num_coords, num_coords)), 1))
    weights = jnp.asarray(rng.normal(0.0, 0.7, (2, num_coords)))
    table = jnp.asarray(rng.normal(0.0, 1.0, (num_coords, 8)))

    def log_pi(x):
        xf = jnp.asarray(x, jnp.result_type(float))
        smooth = field @ xf + xf @ coupling @ xf + jnp.sum(jnp.logaddexp(0.0, weights @ xf))
        lookup = table[jnp.arange(num_coords), jnp.asarray(jnp.round(xf), jnp.int32) + 1]
        return smooth + jnp.sum(lookup)

    return log_pi


def exact_distribution(log_pi, states: np.ndarray) -> np.ndarray:
    """Normalised probabilities of `states` under the unnormalised `log_pi`."""
    log_p = np.asarray(jax.vmap(log_pi)(jnp.asarray(states)), dtype=np.float64)
    p = np.exp(log_p - log_p.max())
    return p / p.sum()


def enumerate_model(model, args, sites):
    """
    Exact posterior of a numpyro model over the joint values of `sites`, a dict
    ``name -> (shape, values)`` listing each site's support (truncated if infinite); every
    other latent site must be enumerated or absent. Returns the states as a flat integer
    array ``(S, N)`` (sites in the given order, row-major) and their probabilities, from
    numpyro's own ``log_density``.
    """
    from numpyro.infer.util import log_density

    names = list(sites)
    shapes = [sites[name][0] for name in names]
    sizes = [int(np.prod(shape)) for shape in shapes]
    per_coord = [
        sites[name][1] for name, size in zip(names, sizes, strict=True) for _ in range(size)
    ]
    states = np.array(list(itertools.product(*per_coord)), dtype=np.int32)

    def log_joint(flat):
        values, start = {}, 0
        for name, shape, size in zip(names, shapes, sizes, strict=True):
            values[name] = flat[start : start + size].reshape(shape)
            start += size
        return log_density(model, args, {}, values)[0]

    log_p = np.asarray(jax.jit(jax.vmap(log_joint))(jnp.asarray(states)), np.float64)
    p = np.exp(log_p - log_p.max())
    return states, p / p.sum()


# --- exact transition matrices --------------------------------------------------------------


def _matrix(states, ys, log_q, log_a, restores):
    """The transition matrix of the moves ``states[i] -> ys[i, k]`` of log probabilities
    ``log_q + log_a`` (rejections on the diagonal), and the forward mass per state."""
    log_q, log_a = np.asarray(log_q, np.float64), np.asarray(log_a, np.float64)
    proposable = np.isfinite(log_q)
    assert np.all(np.asarray(restores)[proposable]), "a move is not undone by its reverse"
    num_states = len(states)
    matrix = np.zeros((num_states, num_states))
    rows = np.broadcast_to(np.arange(num_states)[:, None], proposable.shape)[proposable]
    cols = state_lookup(states)(np.asarray(ys)[proposable])
    np.add.at(matrix, (rows, cols), np.exp(log_q + log_a)[proposable])
    matrix[np.arange(num_states), np.arange(num_states)] += 1.0 - matrix.sum(1)
    return matrix, np.where(proposable, np.exp(log_q), 0.0).sum(1)


def apply_path(position, path, neighbourhood):
    """Move every active coordinate of `path` to its chosen candidate value."""
    candidates = neighbourhood.candidates(position)
    if candidates.shape[1] == 1:
        return jnp.where(path.on_path, candidates[:, 0], position).astype(position.dtype)
    new_values = candidates[path.coords, path.choices]
    # inactive entries point out of range and are dropped
    coords = jnp.where(path.active, path.coords, position.shape[0])
    return position.at[coords].set(new_values.astype(position.dtype), mode="drop")


def reverse_path(position, new_position, path, neighbourhood):
    """The path from `new_position` back to `position` over the same coordinates."""
    candidates = neighbourhood.candidates(new_position)[path.coords]
    restores = candidates == position[path.coords][:, None]
    choices = jnp.argmax(restores, axis=1).astype(path.choices.dtype)
    return path._replace(choices=choices)


def path_transition_matrix(local_fn, neighbourhood, states, path_length, balancing, length=None):
    """
    The exact LBP-R transition matrix over the enumerated `states` (rows of the flat
    integer vector): from every state, every ordered path of `path_length` distinct
    coordinates with every choice of candidate value, through the core path functions and
    the M-H test of the kernel. Paths are padded to `length` (default `path_length`) with
    inactive entries that repeat coordinate 0, as the kernel pads them.

    Returns the matrix and the forward mass of all paths per state (which must be 1);
    checks that every proposable move is undone by its reverse path.
    """
    from numpyro_discrete.core import path, path_draw
    from numpyro_discrete.core.balancing import get_balancing, log_weights

    states = np.asarray(states, np.int32)
    num_coords = states.shape[1]
    length = path_length if length is None else length
    log_balancing = get_balancing(balancing)
    num_candidates = neighbourhood.candidates(jnp.asarray(states[0])).shape[1]
    orders = list(itertools.permutations(range(num_coords), path_length))
    picks = list(itertools.product(range(num_candidates), repeat=path_length))
    coords = np.array([c for c in orders for _ in picks], np.int32).reshape(-1, path_length)
    choices = np.array([m for _ in orders for m in picks], np.int32).reshape(-1, path_length)
    coords = jnp.asarray(np.pad(coords, ((0, 0), (0, length - path_length))))
    choices = jnp.asarray(np.pad(choices, ((0, 0), (0, length - path_length))))

    def move(x, coords, choices):
        log_p_x, d_x = local_fn(x)
        forward = path_draw.path_from_coords(coords, choices, path_length, num_coords)
        y = apply_path(x, forward, neighbourhood)
        log_q_forward = path.path_log_prob(log_weights(log_balancing, d_x), forward)
        log_p_y, d_y = local_fn(y)
        backward = reverse_path(x, y, forward, neighbourhood)
        log_q_reverse = path.path_log_prob(log_weights(log_balancing, d_y), backward, True)
        log_accept = jnp.minimum(log_p_y - log_p_x + log_q_reverse - log_q_forward, 0.0)
        restored = apply_path(y, backward, neighbourhood)
        return y, log_q_forward, log_accept, jnp.all(restored == x)

    moves = jax.vmap(lambda x: jax.vmap(lambda c, m: move(x, c, m))(coords, choices))
    return _matrix(states, *jax.jit(moves)(jnp.asarray(states)))


def coordinatewise_transition_matrices(local_fn, neighbourhood, squared_distance, states):
    """
    The exact transition matrices of the coordinate-wise (DMALA/ACS) step over the
    enumerated `states`: from every state, every vector of per-coordinate choices (stay, or
    one candidate), through the core proposal functions and the M-H test.

    Returns ``matrix_at(step_size, balancing) -> (matrix, forward_mass)``, compiled once;
    it checks that every proposable move is undone by its reverse choices.
    """
    from numpyro_discrete.core import coordinatewise as cw

    states = np.asarray(states, np.int32)
    num_columns = neighbourhood.candidates(jnp.asarray(states[0])).shape[1] + 1
    choice_vectors = jnp.asarray(
        np.array(list(itertools.product(range(num_columns), repeat=states.shape[1])), np.int32)
    )

    def moves(step_size, balancing):
        def log_probs(x):
            log_p, d = local_fn(x)
            candidates = neighbourhood.candidates(x)
            log_q = cw.proposal_log_probs(d, squared_distance(x, candidates), step_size, balancing)
            return log_p, candidates, log_q

        def move(x, choices):
            log_p_x, candidates_x, log_q_x = log_probs(x)
            y = cw.apply_choices(x, choices, candidates_x)
            log_p_y, candidates_y, log_q_y = log_probs(y)
            back = cw.reverse_choices(x, y, candidates_y)
            log_q_forward = cw.proposal_log_prob(log_q_x, choices)
            log_q_reverse = cw.proposal_log_prob(log_q_y, back)
            log_accept = jnp.minimum(log_p_y - log_p_x + log_q_reverse - log_q_forward, 0.0)
            restored = cw.apply_choices(y, back, candidates_y)
            return y, log_q_forward, log_accept, jnp.all(restored == x)

        return jax.vmap(lambda x: jax.vmap(lambda c: move(x, c))(choice_vectors))(
            jnp.asarray(states)
        )

    moves = jax.jit(moves)
    return lambda step_size, balancing: _matrix(states, *moves(step_size, balancing))


def chromatic_class_matrix(target, structure, states, colour, mh_test=True, coordinate_test=False):
    """The exact transition matrix of the move of class `colour` of a chromatic sweep over
    the enumerated `states` (rows of the target's flat vector): the class's proposal from
    the core ``class_logits`` at every state (its members padded as the kernel pads
    them), every joint choice of its members' options, and the MH test (every draw taken
    without `mh_test`; with `coordinate_test`, each member's draw tested on its own, the
    class's matrix the product of its members' one-coordinate kernels)."""
    log_terms = target.log_terms()
    neighbourhood = target.neighbourhood
    in_class = structure.colour == colour
    order, starts, sizes, width = chromatic.class_members(structure)
    padded = order[starts[colour] : starts[colour] + width].copy()
    padded[sizes[colour] :] = structure.num_coords
    members = padded[: sizes[colour]]

    @jax.jit
    def conditional(x):
        terms = log_terms(x)
        values, logits = chromatic.class_logits(
            log_terms,
            structure,
            neighbourhood,
            x,
            terms,
            jnp.asarray(in_class),
            jnp.asarray(padded),
        )
        return jnp.sum(terms), values, jax.nn.log_softmax(logits, axis=-1)

    lookup = state_lookup(states)
    cache = {}

    def at(i):
        if i not in cache:
            cache[i] = [np.asarray(a, np.float64) for a in conditional(jnp.asarray(states[i]))]
        return cache[i]

    rows = range(len(members))
    matrix = np.zeros((len(states), len(states)))
    if coordinate_test:
        for i in range(len(states)):
            _, values, log_probs = at(i)
            per_member = []
            for r, j in zip(rows, members, strict=True):
                x_j = states[i][j]
                moves = {}
                for slot in range(1, values.shape[1]):
                    log_q = log_probs[r, slot]
                    if not np.isfinite(log_q) or values[r, slot] == x_j:
                        continue
                    y = states[i].copy()
                    y[j] = values[r, slot]
                    _, values_y, log_probs_y = at(int(lookup(y[None])[0]))
                    log_back = np.max(np.where(values_y[r] == x_j, log_probs_y[r], -np.inf))
                    log_ratio = log_probs[r, slot] - log_probs[r, 0]
                    accept = min(1.0, np.exp(log_ratio + log_back - log_q))
                    moves[values[r, slot]] = (
                        moves.get(values[r, slot], 0.0) + np.exp(log_q) * accept
                    )
                moves[x_j] = 1.0 - sum(moves.values())
                per_member.append(list(moves.items()))
            for choice in itertools.product(*per_member):
                y = states[i].copy()
                y[members] = [v for v, _ in choice]
                matrix[i, int(lookup(y[None])[0])] += np.prod([p for _, p in choice])
        return matrix
    for i in range(len(states)):
        log_p, values, log_probs = at(i)
        for slots in itertools.product(*(range(values.shape[1]) for _ in members)):
            log_q = sum(log_probs[r, s] for r, s in zip(rows, slots, strict=True))
            if not np.isfinite(log_q):
                continue
            y = states[i].copy()
            y[members] = [values[r, s] for r, s in zip(rows, slots, strict=True)]
            k = int(lookup(y[None])[0])
            log_p_y, values_y, log_probs_y = at(k)
            log_q_back = sum(
                log_probs_y[r, np.flatnonzero(values_y[r] == states[i][j])[0]]
                for r, j in zip(rows, members, strict=True)
            )
            accept = min(1.0, np.exp(log_p_y - log_p + log_q_back - log_q)) if mh_test else 1.0
            matrix[i, k] += np.exp(log_q) * accept
            matrix[i, i] += np.exp(log_q) * (1.0 - accept)
    return matrix


def chromatic_sweep_matrix(target, structure, states, mh_test=True, coordinate_test=False):
    """The product of the class matrices, in the order a sweep visits the classes."""
    matrix = np.eye(len(states))
    for c in range(structure.num_colours):
        matrix = matrix @ chromatic_class_matrix(
            target, structure, states, c, mh_test, coordinate_test
        )
    return matrix


def sampled_sweep_counts(sweep, target, states, seed):
    """Transitions counted from 400 jitted sweeps out of every state."""
    log_terms = target.log_terms()

    @jax.jit
    def next_states(keys, x):
        state = chromatic.init(x, log_terms)
        return jax.vmap(lambda key: sweep(key, state, log_terms)[0].position)(keys)

    lookup = state_lookup(states)
    counts = np.zeros((len(states), len(states)))
    for i, key in enumerate(random.split(random.key(seed), len(states))):
        ends = lookup(np.asarray(next_states(random.split(key, 400), jnp.asarray(states[i]))))
        counts[i] = np.bincount(ends, minlength=len(states))
    return counts


def site_scan_matrix(target, neighbourhood, states, order):
    """The exact matrix of one systematic-scan sweep: the product over `order` of each
    coordinate's matrix, whose rows are the conditionals the kernel computes
    (:func:`~numpyro_discrete.core.site_scan.site_conditional`), every option enumerated."""
    log_terms = target.log_terms()
    conditional = jax.jit(
        lambda x, j: site_scan.site_conditional(
            log_terms, neighbourhood, x, jnp.sum(log_terms(x)), j
        )
    )
    lookup = state_lookup(states)
    sweep = np.eye(len(states))
    for j in order:
        visit = np.zeros_like(sweep)
        for i, state in enumerate(states):
            values, log_p_values = map(np.asarray, conditional(jnp.asarray(state), j))
            probs = np.exp(log_p_values - log_p_values.max())
            ends = np.repeat(state[None], len(values), 0)
            ends[:, j] = values
            np.add.at(visit[i], lookup(ends), probs / probs.sum())
        sweep = sweep @ visit
    return sweep


def compiled_sweep_tables(layout, log_terms):
    """:func:`~numpyro_discrete.core.table_sweep.sweep_tables` as one compiled program: run
    op by op, a random model's terms compile one small program per operation (seconds per
    model)."""
    return jax.jit(lambda: table_sweep.sweep_tables(layout, log_terms))()


def table_scan_matrix(target, layout, states, order):
    """The exact matrix of visiting the coordinates in `order`, each drawn from the
    conditional the sweep by pair tables computes
    (:func:`~numpyro_discrete.core.table_sweep.class_logits`) over its slots."""
    values = compiled_sweep_tables(layout, target.log_terms())
    logits = jax.jit(lambda x, j: table_sweep.class_logits(layout, values, x, j[None])[0])
    lookup = state_lookup(states)
    sweep = np.eye(len(states))
    for j in order:
        visit = np.zeros_like(sweep)
        slots = np.arange(layout.num_slots)
        for i, state in enumerate(states):
            row = np.asarray(logits(jnp.asarray(state), jnp.asarray(j)), np.float64)
            inside = slots < layout.num_values[j]
            probs = np.exp(row[inside] - row[inside].max())
            ends = np.repeat(state[None], inside.sum(), 0)
            ends[:, j] = layout.lower[j] + slots[inside]
            np.add.at(visit[i], lookup(ends), probs / probs.sum())
        sweep = sweep @ visit
    return sweep


def offset_probabilities(offsets, tables, x):
    """``(N, S)``: each coordinate's conditional over its slots at `x` as the sweep by
    offsets computes it (:func:`~numpyro_discrete.core.offset_sweep.channels`: log-odds
    of slot 1 for binary coordinates, else logits)."""
    channels = [np.asarray(c, np.float64) for c in offset_sweep.channels(offsets, tables, x)]
    if len(channels) == 1:
        up = 1.0 / (1.0 + np.exp(-channels[0]))
        return np.stack([1.0 - up, up], axis=1)
    logits = np.stack(channels, axis=1)
    probs = np.exp(logits - logits.max(1, keepdims=True))
    return probs / probs.sum(1, keepdims=True)


def block_log_probs(phi, psi, length, count):
    """``{sequence: log p}`` of one block's chain from its potentials, by enumeration."""
    sequences = list(itertools.product(*(range(int(c)) for c in count[:length])))
    energy = np.array(
        [
            sum(phi[i, v] for i, v in enumerate(seq))
            + sum(psi[i, seq[i], seq[i + 1]] for i in range(length - 1))
            for seq in sequences
        ]
    )
    top = energy.max()
    log_z = top + np.log(np.sum(np.exp(energy - top)))
    return dict(zip(sequences, energy - log_z, strict=True))


def block_class_matrix(target, plan, states, c, mh_test=True):
    """The exact transition matrix of the move of class `c`: the core's potentials at each
    state, every joint draw of the class's blocks with its probability (the blocks' chains
    enumerated), the reverse draw's probability from the potentials at the new state, and
    the MH test (every draw taken without `mh_test`, the potentials then read as the terms'
    values rather than their changes from the state's, as the kernel's Gibbs move reads
    them)."""
    log_terms = target.log_terms()

    @jax.jit
    def potentials(x):
        terms = log_terms(x)
        baseline = terms if mh_test else None
        return (jnp.sum(terms),) + block_gibbs.class_potentials(log_terms, plan, c, x, baseline)

    coords = plan.coords[c]
    rows = [coords[b][coords[b] < target.num_coords] for b in range(coords.shape[0])]
    rows = [r for r in rows if r.size]
    lower = plan.lower
    lookup = state_lookup(states)
    cache = {}

    def at(i):
        if i not in cache:
            log_p, phi, psi = (
                np.asarray(a, np.float64) for a in potentials(jnp.asarray(states[i]))
            )
            chains = [
                block_log_probs(phi[b], psi[b], row.size, plan.num_values[row])
                for b, row in enumerate(rows)
            ]
            cache[i] = log_p, chains
        return cache[i]

    def log_q(chains, x):
        return sum(
            chains[b][tuple(int(v) for v in x[row] - lower[row])] for b, row in enumerate(rows)
        )

    matrix = np.zeros((len(states), len(states)))
    for i in range(len(states)):
        log_p, chains = at(i)
        for draw in itertools.product(*(chain.items() for chain in chains)):
            forward = sum(lp for _, lp in draw)
            if not np.isfinite(forward):
                continue
            y = states[i].copy()
            for row, (sequence, _) in zip(rows, draw, strict=True):
                y[row] = lower[row] + np.asarray(sequence)
            k = int(lookup(y[None])[0])
            log_p_y, chains_y = at(k)
            reverse = log_q(chains_y, states[i])
            accept = min(1.0, np.exp(log_p_y - log_p + reverse - forward)) if mh_test else 1.0
            matrix[i, k] += np.exp(forward) * accept
            matrix[i, i] += np.exp(forward) * (1.0 - accept)
    return matrix


def block_sweep_matrix(target, plan, states, mh_test=True):
    """The product over the classes of :func:`block_class_matrix`: one sweep."""
    matrix = np.eye(len(states))
    for c in range(plan.coords.shape[0]):
        matrix = matrix @ block_class_matrix(target, plan, states, c, mh_test)
    return matrix


def coloured_ratios_checker(target, structure, by_stencil=True):
    """A function asserting, at a position, that the jitted colour-batched exact ratios of
    `structure` (invalid candidates at -inf) equal the brute-force ones (one evaluation of
    ``log pi`` per coordinate and value); it returns the brute-force ratios."""
    brute = jax.jit(exact_local_fn(target.log_density(), target.neighbourhood))
    coloured = coloured_ratios(target.log_terms(), structure, None, by_stencil=by_stencil)

    @jax.jit
    def coloured_table(x):
        candidates = target.neighbourhood.candidates(x)
        valid = target.neighbourhood.valid(x)
        log_p, d = coloured(x, None, candidates, valid)
        return log_p, jnp.where(valid, d, -jnp.inf)

    def check(x):
        log_p, d = coloured_table(x)
        log_p_brute, d_brute = brute(x)
        np.testing.assert_allclose(log_p, log_p_brute, rtol=1e-10)
        np.testing.assert_allclose(d, d_brute, rtol=1e-9, atol=1e-9)
        return d_brute

    return check


def target_distribution(target, states):
    """The normalised probabilities of the target's flat `states`."""
    log_p = jax.jit(jax.vmap(target.log_density()))(jnp.asarray(states))
    log_p = np.asarray(log_p, np.float64)
    p = np.exp(log_p - log_p.max())
    return p / p.sum()


def sampled_transitions(
    kernel, target, states: np.ndarray, draws_per_state: int, seed: int, end_states=None
):
    """Transition counts of one compiled ``kernel.sample`` (the function ``MCMC`` calls)
    from every state of `states` to every state of `end_states` (default `states`): the
    chains are initialised at each state by ``kernel.init`` with ``init_params`` under
    ``vmap``, then stepped once under ``vmap`` (advice warnings are silenced)."""
    keys = random.split(random.key(seed), len(states) * draws_per_state)
    starts = jnp.asarray(np.repeat(states, draws_per_state, axis=0))

    @jax.jit
    def step(keys, starts):
        def one(key, x):
            state = kernel.init(key, 0, target.unflatten(x), (), {})
            return target.flatten(kernel.sample(state, (), {}).z)

        return jax.vmap(one)(keys, starts)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ends = np.asarray(step(keys, starts))
    end_states = states if end_states is None else end_states
    lookup = state_lookup(end_states)
    rows = np.repeat(np.arange(len(states)), draws_per_state)
    counts = np.zeros((len(states), len(end_states)))
    np.add.at(counts, (rows, lookup(ends)), 1)
    return counts


# --- checks ---------------------------------------------------------------------------------


def assert_reversible(matrix, pi, atol=1e-10):
    """`matrix` is a stochastic matrix in detailed balance with `pi` (and so leaves it
    invariant), to `atol`."""
    assert np.all(matrix >= -1e-15)
    np.testing.assert_allclose(matrix.sum(1), 1.0, atol=1e-12)
    flow = pi[:, None] * matrix
    assert np.max(np.abs(flow - flow.T)) < atol
    np.testing.assert_allclose(pi @ matrix, pi, atol=atol)


def assert_irreducible(matrix):
    """Every state reaches every other one (detailed balance alone also holds for a kernel
    that never moves)."""
    reach = (matrix > 0).astype(float) + np.eye(len(matrix))
    assert np.all(np.linalg.matrix_power(reach, len(matrix)) > 0)


def assert_invariant_and_irreducible(matrix, pi, atol=1e-10, rows_atol=1e-12):
    """`matrix` is stochastic (rows summing to 1 to `rows_atol`), leaves `pi` invariant to
    `atol` and is irreducible."""
    np.testing.assert_allclose(matrix.sum(1), 1.0, atol=rows_atol)
    np.testing.assert_allclose(pi @ matrix, pi, atol=atol)
    assert_irreducible(matrix)


def assert_step_draws_from(matrix, kernel, target, states, seed, message=""):
    """The compiled step's transitions, 300 from every state of `states`, fit the rows of
    `matrix` (pooled chi-square p-value above 1e-4)."""
    counts = sampled_transitions(kernel, target, states, 300, seed)
    assert chi_square_rows(counts, matrix) > 1e-4, message


def chi_square_rows(counts, matrix, min_expected=5.0):
    """Pooled chi-square of observed transition counts against the exact rows. In each row
    the cells expected fewer than `min_expected` times are pooled into one (the chi-square
    approximation needs it: one draw in a cell of probability 2e-4 of 300 draws alone gave a
    p-value of 1e-150 on a correct kernel)."""
    expected = counts.sum(1, keepdims=True) * matrix
    assert np.all(counts[expected == 0] == 0), "a transition of probability zero happened"
    small = expected < min_expected
    observed_bins = [counts[~small], counts.sum(1, where=small)]
    expected_bins = [expected[~small], expected.sum(1, where=small)]
    observed, expected = np.concatenate(observed_bins), np.concatenate(expected_bins)
    used = expected > 0
    statistic = np.sum((observed[used] - expected[used]) ** 2 / expected[used])
    dof = max(int(used.sum()) - counts.shape[0], 1)
    return stats.chi2.sf(statistic, dof)


def total_variation(p: np.ndarray, q: np.ndarray) -> float:
    return 0.5 * float(np.abs(np.asarray(p) - np.asarray(q)).sum())


def iid_tv_quantile(pi, num_draws, quantile=0.99, reps=200, seed=0):
    """The `quantile` of the total variation between `pi` and the empirical distribution of
    `num_draws` independent exact draws."""
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(num_draws, pi, size=reps)
    tvs = 0.5 * np.abs(counts / num_draws - pi).sum(1)
    return float(np.quantile(tvs, quantile))


def product_of_marginals(states, pi):
    """The product of the one-coordinate marginals of `pi` over the enumerated `states`."""
    product = np.ones(len(states))
    for column in np.asarray(states).T:
        _, value = np.unique(column, return_inverse=True)
        product *= np.bincount(value, weights=pi)[value]
    return product


def flat_draws(samples, names):
    """Draws of several sites as one flat integer matrix (sites in order, row-major)."""
    num_draws = samples[names[0]].shape[0]
    return np.concatenate(
        [np.asarray(samples[name]).reshape(num_draws, -1) for name in names], axis=1
    )


def assert_tv(draws, states, pi, ess_fraction=0.2, against_product=True):
    """
    Total variation between the draws (rows of `states`) and the enumerated target `pi`
    below the 99% quantile of the TV that independent exact draws reach with `ess_fraction`
    of the sample size (an ESS of that fraction of the draws). With `against_product`, the
    tolerance must also be smaller than the TV to the product of the target's marginals, so
    that a sampler ignoring the couplings fails.
    """
    empirical = np.bincount(state_lookup(states)(draws), minlength=len(states)) / len(draws)
    tolerance = iid_tv_quantile(pi, int(len(draws) * ess_fraction))
    if against_product:
        assert tolerance < total_variation(pi, product_of_marginals(states, pi))
    tv = total_variation(empirical, pi)
    assert tv < tolerance, (tv, tolerance)


def assert_tv_on_random_binary_target(
    kernel_fn,
    *,
    num_coords,
    num_hidden,
    target_seed,
    seed,
    num_chains,
    against_product=True,
    **run_options,
):
    """:func:`assert_tv` of the vectorized chains of ``kernel_fn(potential_fn)``, started at
    zero, on :func:`random_binary_target` (`run_options`: :func:`run_vectorized`'s others)."""
    log_pi = random_binary_target(num_coords, seed=target_seed, num_hidden=num_hidden)
    states = all_binary_states(num_coords)
    pi = exact_distribution(log_pi, states)
    init = {"x": jnp.zeros((num_chains, num_coords), jnp.int32)}
    mcmc = run_vectorized(
        kernel_fn(lambda z: -log_pi(z["x"])),
        num_chains=num_chains,
        seed=seed,
        init_params=init,
        **run_options,
    )
    assert_tv(mcmc.get_samples()["x"], states, pi, against_product=against_product)


def effective_sample_sizes(draws):
    """ESS of each coordinate of ``(chains, draws, ...)`` draws (NaN where constant)."""
    draws = np.asarray(draws, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(effective_sample_size(draws))


def mcse_of_mean(draws):
    """Monte Carlo standard error of the mean of each coordinate of ``(chains, draws, ...)``
    draws, from the ESS."""
    draws = np.asarray(draws, dtype=np.float64)
    flat = draws.reshape((-1,) + draws.shape[2:])
    return np.sqrt(flat.var(0) / effective_sample_sizes(draws))


def assert_within_mcse(estimate, reference, se, num_se=4.0, what="estimate", slack=0.0):
    """``|estimate - reference| < num_se * se + slack`` in every coordinate."""
    error = np.abs(np.asarray(estimate) - np.asarray(reference))
    assert np.all(error < num_se * np.asarray(se) + slack), (
        f"{what}: |error| / se = {error / np.asarray(se)} (estimate {estimate}, "
        f"reference {reference})"
    )


def assert_mean_within_mcse(draws, reference, num_se=4.0, what="mean", slack=0.0):
    """The mean over chains and draws of ``(chains, draws, ...)`` draws is within `num_se`
    ESS-based standard errors (plus `slack`) of `reference`."""
    draws = np.asarray(draws, dtype=np.float64)
    assert_within_mcse(draws.mean((0, 1)), reference, mcse_of_mean(draws), num_se, what, slack)


# --- mixed discrete and continuous models (the LBPGibbs tests') ----------------------------

Y_MIX = jnp.array([0.1, 0.9, 1.3, -0.4, 0.6, 0.2, 1.1, 0.45])
SCALE_MIX = 0.5


def beta_bernoulli_model(y):
    """``y_i ~ N(z_i, 0.5^2)``, ``z_i ~ Bernoulli(p)``, ``p ~ Beta(2, 2)``."""
    p = numpyro.sample("p", dist.Beta(2.0, 2.0))
    z = numpyro.sample("z", dist.Bernoulli(p).expand(y.shape))
    numpyro.sample("y", dist.Normal(z, SCALE_MIX), obs=y)


def run_vectorized(
    kernel,
    *args,
    num_warmup=1000,
    num_samples=5000,
    num_chains=4,
    seed=0,
    init_params=None,
    extra_fields=(),
):
    """``MCMC`` with `num_warmup` warmup steps and `num_chains` vectorized chains, run on
    `args`."""
    mcmc = MCMC(
        kernel,
        num_warmup=num_warmup,
        num_samples=num_samples,
        num_chains=num_chains,
        chain_method="vectorized",
        progress_bar=False,
    )
    mcmc.run(random.key(seed), *args, init_params=init_params, extra_fields=extra_fields)
    return mcmc


# --- short runs of a product of Bernoullis (the kernel and integration tests') ------------

PRODUCT_PROBS = jnp.array([0.1, 0.3, 0.5, 0.7, 0.9, 0.2])


def product_model():
    """Independent ``x_i ~ Bernoulli(PRODUCT_PROBS[i])`` and their sum, a deterministic site."""
    x = numpyro.sample("x", dist.Bernoulli(PRODUCT_PROBS))
    numpyro.deterministic("total", jnp.sum(x))


def quick_mcmc(kernel, num_warmup, num_samples, **kwargs):
    """``MCMC`` of `kernel` without a progress bar (`kwargs`: its other options)."""
    return MCMC(
        kernel, num_warmup=num_warmup, num_samples=num_samples, progress_bar=False, **kwargs
    )
