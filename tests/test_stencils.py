"""Stencils (``structure/stencils.py``): the pieces found hold exactly the dependency pairs,
on random pair sets and on lattice models written as users write them, and the sums by
stencil (``core.local_ratios.stencil_sums``) are the sums over the pairs (their definition)."""

from hypothesis import given, settings
from hypothesis import strategies as st
import numpy as np
import pytest

import jax
from jax import random
import jax.numpy as jnp

import numpyro
import numpyro.distributions as dist

from numpyro_discrete import ChromaticGibbs
from numpyro_discrete.core.local_ratios import stencil_sums
from numpyro_discrete.structure.stencils import find_stencil

SETTINGS = dict(deadline=None, derandomize=True, max_examples=50)


def piece_pairs(stencil):
    """Every (term, coordinate) pair of the pieces, in order (duplicates kept)."""
    pairs = []
    for p in stencil.pieces:
        rows, cols = np.meshgrid(np.arange(p.num_rows), np.arange(p.row_length), indexing="ij")
        pairs.append(
            np.stack(
                [
                    (p.term_start + rows * p.term_stride + cols).ravel(),
                    (p.coord_start + rows * p.coord_stride + cols).ravel(),
                ],
                1,
            )
        )
    return np.concatenate(pairs)


def assert_exact_cover(stencil, terms, coords):
    """The pieces hold each pair once and nothing else, inside the arrays' bounds."""
    found = piece_pairs(stencil)
    assert len({tuple(p) for p in found}) == len(found), "a pair is in two pieces"
    assert {tuple(p) for p in found} == set(zip(terms.tolist(), coords.tolist(), strict=True))
    assert found[:, 0].max() < stencil.num_terms and found[:, 1].max() < stencil.num_coords


def sums_by_definition(terms, coords, values, num_coords):
    out = np.zeros(values.shape[:-1] + (num_coords,))
    np.add.at(np.moveaxis(out, -1, 0), coords, np.moveaxis(values[..., terms], -1, 0))
    return out


@st.composite
def pair_sets(draw):
    """Unique (term, coordinate) pairs: random ones, or runs and strided rows of runs (what
    lattices give), or both."""
    num_terms = draw(st.integers(1, 40))
    num_coords = draw(st.integers(1, 40))
    pairs = set()
    for _ in range(draw(st.integers(0, 4))):
        e0, j0 = draw(st.integers(0, num_terms - 1)), draw(st.integers(0, num_coords - 1))
        length = draw(st.integers(1, 6))
        rows = draw(st.integers(1, 4))
        se, sj = draw(st.integers(length, length + 3)), draw(st.integers(length, length + 3))
        for r in range(rows):
            for c in range(length):
                e, j = e0 + r * se + c, j0 + r * sj + c
                if e < num_terms and j < num_coords:
                    pairs.add((e, j))
    for _ in range(draw(st.integers(0 if pairs else 1, 12))):
        pairs.add((draw(st.integers(0, num_terms - 1)), draw(st.integers(0, num_coords - 1))))
    pairs = np.array(sorted(pairs), np.int32)
    order = np.random.default_rng(draw(st.integers(0, 99))).permutation(len(pairs))
    return pairs[order, 0], pairs[order, 1], num_terms, num_coords


@settings(**SETTINGS)
@given(pairs=pair_sets(), max_pieces=st.sampled_from([1, 4, 32]))
def test_pieces_hold_exactly_the_pairs(pairs, max_pieces):
    """Whatever the pairs, a stencil found covers each pair once and no other, within
    `max_pieces`; and its sums are the sums over the pairs."""
    terms, coords, num_terms, num_coords = pairs
    stencil = find_stencil(terms, coords, num_terms, num_coords, max_pieces=max_pieces)
    if stencil is None:
        assert max_pieces < 32 or len(terms) > 32, "at most 32 pairs are always 32 pieces"
        return
    assert len(stencil.pieces) <= max_pieces
    assert_exact_cover(stencil, terms, coords)
    values = np.random.default_rng(0).normal(size=(2, num_terms))
    np.testing.assert_allclose(
        np.asarray(stencil_sums(stencil, jnp.asarray(values))),
        sums_by_definition(terms, coords, values, num_coords),
        rtol=1e-5,
        atol=1e-5,
    )


def test_no_stencil_without_pairs_or_beyond_the_piece_limit():
    assert find_stencil(np.zeros(0, np.int32), np.zeros(0, np.int32), 3, 3) is None
    # a random sparse graph: no runs to merge
    rng = np.random.default_rng(0)
    terms = np.repeat(np.arange(200), 2)
    coords = np.stack([rng.permutation(300)[:200], rng.permutation(300)[:200]], 1).ravel()
    keep = np.unique(np.stack([terms, coords], 1), axis=0)
    assert find_stencil(keep[:, 0], keep[:, 1], 200, 300) is None


# --- lattice models as users write them ------------------------------------------------------


def ising_slices(p, q):
    def model():
        x = numpyro.sample("x", dist.Bernoulli(0.4).expand([p, q]))
        s = 2.0 * x - 1.0
        numpyro.factor("right", 0.5 * s[:, :-1] * s[:, 1:])
        numpyro.factor("down", -0.3 * s[:-1, :] * s[1:, :])

    return model


def ising_torus(p, q):
    def model():
        x = numpyro.sample("x", dist.Bernoulli(0.5).expand([p, q]))
        s = 2.0 * x - 1.0
        numpyro.factor("right", 0.2 * s * jnp.roll(s, 1, axis=1))
        numpyro.factor("down", 0.2 * s * jnp.roll(s, 1, axis=0))

    return model


def potts_tables(p, q):
    field = jnp.asarray(np.random.default_rng(1).normal(size=(p, q, 3)))
    interaction = 0.8 * jnp.eye(3)

    def model():
        x = numpyro.sample("x", dist.Categorical(logits=field))
        numpyro.factor("down", interaction[x[1:, :], x[:-1, :]])
        numpyro.factor("right", interaction[x[:, 1:], x[:, :-1]])

    return model


def two_sites_and_diagonals(p, q):
    """Two sites, one coupled to the other elementwise, and diagonal pairs of one."""

    def model():
        a = numpyro.sample("a", dist.Bernoulli(0.3).expand([p, q]))
        b = numpyro.sample("b", dist.Bernoulli(0.6).expand([p, q]))
        numpyro.factor("ab", 0.7 * (a == b))
        numpyro.factor("diagonal", 0.4 * a[1:, 1:] * a[:-1, :-1])
        numpyro.sample("obs", dist.Normal(a + b, 1.0), obs=jnp.ones((p, q)))

    return model


def volume(p, q):
    """A 3-D lattice of 2 layers."""

    def model():
        x = numpyro.sample("x", dist.Bernoulli(0.5).expand([2, p, q]))
        numpyro.factor("layers", 0.5 * (x[0] == x[1]))
        numpyro.factor("rows", 0.3 * (x[:, 1:] == x[:, :-1]))
        numpyro.factor("columns", 0.3 * (x[:, :, 1:] == x[:, :, :-1]))

    return model


LATTICES = [ising_slices, ising_torus, potts_tables, two_sites_and_diagonals, volume]


@pytest.mark.parametrize("lattice", LATTICES, ids=lambda f: f.__name__)
def test_lattice_models_are_stencils(lattice):
    """Detection on lattice models as users write them (slices, rolls, table lookups,
    several sites, 3-D) gives pairs that are a stencil of a few pieces per factor (not per
    row: 7 rows here), and stencil sums of the model's own terms equal the sums over the pairs."""
    kernel = ChromaticGibbs(lattice(7, 5))
    kernel.init(random.key(0), 0, None, (), {})
    structure = kernel._target.structure
    stencil = find_stencil(
        structure.pair_terms, structure.pair_coords, structure.num_terms, structure.num_coords
    )
    assert stencil is not None
    # a piece per (factor, slot) and per wrap-around of a roll, not per row
    assert len(stencil.pieces) <= 16
    assert_exact_cover(stencil, structure.pair_terms, structure.pair_coords)
    log_terms = kernel._target.log_terms((), {})
    x = random.randint(random.key(1), (structure.num_coords,), 0, 2)
    terms = np.asarray(jax.jit(log_terms)(x), np.float64)
    np.testing.assert_allclose(
        np.asarray(stencil_sums(stencil, jnp.asarray(terms))),
        sums_by_definition(
            structure.pair_terms, structure.pair_coords, terms, structure.num_coords
        ),
        rtol=1e-5,
        atol=1e-5,
    )


def test_stencil_sums_under_vmap_and_jit():
    """The sums are plain array code: batched and compiled like the rest of a sweep."""
    terms = np.array([0, 1, 2, 3, 3])
    coords = np.array([0, 1, 2, 0, 2])
    stencil = find_stencil(terms, coords, 4, 3)
    values = np.arange(12.0).reshape(3, 4)
    batched = jax.jit(jax.vmap(lambda v: stencil_sums(stencil, v)))(jnp.asarray(values))
    np.testing.assert_allclose(batched, sums_by_definition(terms, coords, values, 3))
