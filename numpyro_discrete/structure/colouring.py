"""The interaction graph of the coordinates and its colouring (``ALGORITHMS.md``,
"Structure"): ``j ~ k`` when some term depends on both, and a colouring puts no two
interacting coordinates in one class, so that every coordinate of a class can move at once
and each term sees at most one of them move.
"""

from typing import NamedTuple

import networkx as nx
import numpy as np
import scipy.sparse
import scipy.sparse.csgraph

from numpyro_discrete.structure.dependencies import TermDependencies

__all__ = [
    "TermStructure",
    "colour_coordinates",
    "dense_structure",
    "interaction_graph",
    "shared_term_graph",
    "term_structure",
    "two_colouring",
]

# networkx's greedy strategies tried, best (fewest colours) kept: largest degree first is
# good on irregular graphs, breadth-first order is optimal (2) on bipartite ones (lattices)
_STRATEGIES = ("largest_first", "connected_sequential_bfs")


class TermStructure(NamedTuple):
    """
    What the structure-aware proposals need, as static numpy arrays.

    - **colour** - ``(N,)`` class of each coordinate, ``0 <= colour < num_colours``.
    - **num_colours** - ``C``.
    - **pair_terms**, **pair_coords** - the ``(term, coordinate)`` dependency pairs: a
      change of coordinate ``j`` changes only the terms ``e`` paired with it.
    - **dense_terms** - terms that may depend on every coordinate; with them, every class is
      one coordinate and a class's move changes them as it changes ``log pi``.
    - **num_terms** - ``E``.
    - **coord_terms** - ``(N + 1, D)`` the terms of each coordinate, padded with ``E`` (and
      a last row of padding), for sums by gathers; ``None`` where ``D``, the largest number
      of terms of one coordinate, would make it much larger than the pairs.
    - **exact** - whether the dependencies are proven (detection read no value that may
      change; see :attr:`~numpyro_discrete.structure.dependencies.TermDependencies.exact`):
      a class's conditional draw is then exactly its conditional, and sweeps may skip the
      reverse half of their Metropolis-Hastings test.
    """

    colour: np.ndarray
    num_colours: int
    pair_terms: np.ndarray
    pair_coords: np.ndarray
    dense_terms: np.ndarray
    num_terms: int
    coord_terms: np.ndarray | None
    exact: bool

    @property
    def num_coords(self) -> int:
        """``N``."""
        return int(self.colour.shape[0])


def interaction_graph(dependencies: TermDependencies) -> scipy.sparse.csr_array:
    """The symmetric ``(N, N)`` adjacency of the coordinates (no self loops); dense terms
    are left out (a model with one is dense anyway)."""
    return shared_term_graph(
        dependencies.terms, dependencies.coords, dependencies.num_terms, dependencies.num_coords
    )


def shared_term_graph(
    terms: np.ndarray, nodes: np.ndarray, num_terms: int, num_nodes: int
) -> scipy.sparse.csr_array:
    """The symmetric ``(num_nodes, num_nodes)`` adjacency (no self loops) of the nodes that
    share a term, where node ``nodes[i]`` takes part in term ``terms[i]``: coordinates, or
    blocks of coordinates."""
    incidence = scipy.sparse.csr_array(
        (np.ones(terms.shape[0], np.int8), (terms, nodes)), shape=(num_terms, num_nodes)
    )
    adjacency = (incidence.T @ incidence).tocoo()
    off_diagonal = adjacency.row != adjacency.col
    return scipy.sparse.csr_array(
        (
            np.ones(int(off_diagonal.sum()), np.int8),
            (adjacency.row[off_diagonal], adjacency.col[off_diagonal]),
        ),
        shape=(num_nodes, num_nodes),
    )


def two_colouring(adjacency: scipy.sparse.csr_array) -> np.ndarray | None:
    """The colouring of a bipartite `adjacency` by the parity of breadth-first depth (one
    search from a root joined to every connected component, in scipy's compiled graph
    routines), or ``None`` where the graph is not bipartite. Lattices, chains and trees are
    bipartite: their colouring then costs a search, not a Python-level greedy colouring
    (about 1 s at ``N = 10^5`` with networkx)."""
    n = adjacency.shape[0]
    _, component = scipy.sparse.csgraph.connected_components(adjacency, directed=False)
    firsts = np.unique(component, return_index=True)[1]
    root = scipy.sparse.csr_array(
        (np.ones(firsts.size, np.int8), (np.full(firsts.size, n), firsts)), shape=(n + 1, n + 1)
    )
    joined = scipy.sparse.block_diag([adjacency, scipy.sparse.csr_array((1, 1))]) + root
    depth = scipy.sparse.csgraph.shortest_path(joined, directed=False, unweighted=True, indices=n)[
        :n
    ]
    # the first coordinate of each component (depth 1) in class 0, as a greedy colouring
    # in index order puts it
    colour = ((depth.astype(np.int64) - 1) % 2).astype(np.int32)
    rows, cols = adjacency.nonzero()
    return colour if np.all(colour[rows] != colour[cols]) else None


def colour_coordinates(adjacency: scipy.sparse.csr_array) -> np.ndarray:
    """A proper colouring of `adjacency`, colours numbered by decreasing class size: one
    class without interactions, two for a bipartite graph (:func:`two_colouring`), else
    networkx's greedy colouring (the best of :data:`_STRATEGIES`)."""
    n = adjacency.shape[0]
    colour = np.zeros(n, np.int32) if adjacency.nnz == 0 else two_colouring(adjacency)
    if colour is None:
        graph = nx.from_scipy_sparse_array(adjacency)
        best = None
        for strategy in _STRATEGIES:
            colours = nx.greedy_color(graph, strategy=strategy)
            if best is None or max(colours.values()) < max(best.values()):
                best = colours
        colour = np.fromiter((best[j] for j in range(n)), np.int32, n)
    order = np.argsort(-np.bincount(colour), kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return rank[colour].astype(np.int32)


def term_structure(dependencies: TermDependencies) -> TermStructure:
    """The colouring and pairs of `dependencies`; a dense model gets one class per
    coordinate (every coordinate may interact with every other)."""
    if dependencies.is_dense:
        colour = np.arange(dependencies.num_coords, dtype=np.int32)
    else:
        colour = colour_coordinates(interaction_graph(dependencies))
    return TermStructure(
        colour=colour,
        num_colours=int(colour.max()) + 1 if colour.size else 0,
        pair_terms=dependencies.terms,
        pair_coords=dependencies.coords,
        dense_terms=np.flatnonzero(dependencies.dense).astype(np.int32),
        num_terms=dependencies.num_terms,
        coord_terms=coordinate_terms(
            dependencies.terms,
            dependencies.coords,
            dependencies.num_coords,
            dependencies.num_terms,
        ),
        exact=dependencies.exact,
    )


def coordinate_terms(
    pair_terms: np.ndarray, pair_coords: np.ndarray, num_coords: int, num_terms: int
) -> np.ndarray | None:
    """The terms of each coordinate as a padded ``(N + 1, D)`` table (padding ``E``), or
    ``None`` when it would hold more than 4 times as many entries as there are pairs (a
    coordinate in very many terms: sums then go through a scatter)."""
    degree = np.bincount(pair_coords, minlength=num_coords)
    width = int(degree.max()) if degree.size else 0
    if (num_coords + 1) * width > 4 * pair_terms.size + 4096:
        return None
    return terms_by_coordinate(pair_terms, pair_coords, num_coords, num_terms)


def terms_by_coordinate(
    pair_terms: np.ndarray, pair_coords: np.ndarray, num_coords: int, num_terms: int
) -> np.ndarray:
    """The terms of each coordinate as a padded ``(N + 1, D)`` table (padding ``E``, and a
    last row of padding), whatever its size."""
    degree = np.bincount(pair_coords, minlength=num_coords)
    width = int(degree.max()) if degree.size else 0
    order = np.argsort(pair_coords, kind="stable")
    slot = np.arange(pair_coords.size) - np.repeat(np.cumsum(degree) - degree, degree)
    table = np.full((num_coords + 1, width), num_terms, np.int32)
    table[pair_coords[order], slot] = pair_terms[order]
    return table


def dense_structure(num_coords: int, num_terms: int) -> TermStructure:
    """The structure assumed when none could be detected: every term dense, one class per
    coordinate."""
    return TermStructure(
        colour=np.arange(num_coords, dtype=np.int32),
        num_colours=num_coords,
        pair_terms=np.zeros(0, np.int32),
        pair_coords=np.zeros(0, np.int32),
        dense_terms=np.arange(num_terms, dtype=np.int32),
        num_terms=num_terms,
        coord_terms=np.full((num_coords + 1, 0), num_terms, np.int32),
        exact=True,
    )
