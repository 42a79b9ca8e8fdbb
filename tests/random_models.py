"""Random small numpyro models written in the idioms users write, for property-based tests
(``hypothesis``): a :class:`ModelSpec` is drawn by :func:`model_specs`, :func:`build_model`
turns it into a numpyro model, :func:`enumerated_posterior` gives its exact posterior over
the discrete sites (with a continuous site integrated out on a grid), and
:func:`true_dependencies` finds by brute force which terms of the log joint each coordinate
changes.

Sites: ``Bernoulli``, ``Categorical`` (3 values), ``Binomial`` (totals 2-3, equal or
differing by element) and ``DiscreteUniform``, of rank 0-2, declared in any order, some
inside a ``plate``; optionally one continuous ``Normal`` site. Terms: factors and observed
sites that use the values through slices, ``reshape``/transpose, ``table[x]``, ``==``,
``where``, products, ``.sum()``, ``@`` with constant matrices, under ``handlers.scale`` or
``handlers.mask``.
"""

import itertools
import math
from typing import NamedTuple

from hypothesis import strategies as st
import numpy as np

import jax
import jax.numpy as jnp

import numpyro
from numpyro import handlers
import numpyro.distributions as dist
from numpyro.infer.util import log_density

SITE_KINDS = ("bernoulli", "categorical", "binomial", "uniform")
SHAPES = ((), (2,), (3,), (1, 2), (2, 2))
IDIOMS = (
    "chain_eq",
    "table",
    "pair_table",
    "where",
    "product",
    "sum",
    "chain_sum",
    "sum_of_sums",
    "logsumexp",
    "matmul",
    "matvec",
    "transpose",
    "observed",
)
WRAPPERS = ("none", "scale", "mask")
MAX_COORDS = 6
MAX_STATES = 300
# the continuous site is integrated out on this grid (its prior N(0, 1) is negligible
# beyond it)
MU_GRID = np.linspace(-7.0, 7.0, 1401)


class SiteSpec(NamedTuple):
    name: str
    kind: str
    shape: tuple[int, ...]
    in_plate: bool
    # Binomial: totals; DiscreteUniform: (low, high); others unused
    total: tuple[int, ...] | int
    low: int
    high: int


class TermSpec(NamedTuple):
    idiom: str
    first: int  # index of a site
    second: int  # index of a site (may equal first)
    wrapper: str


class ModelSpec(NamedTuple):
    sites: tuple[SiteSpec, ...]
    terms: tuple[TermSpec, ...]
    continuous: bool
    seed: int

    @property
    def num_coords(self) -> int:
        return sum(math.prod(site.shape) for site in self.sites)

    @property
    def discrete_names(self) -> list[str]:
        return [site.name for site in self.sites]

    def describe(self) -> str:
        sites = ", ".join(
            f"{s.name}:{s.kind}{list(s.shape)}{'(plate)' if s.in_plate else ''}" for s in self.sites
        )
        terms = ", ".join(
            f"{t.idiom}({self.sites[t.first].name},{self.sites[t.second].name})"
            + ("" if t.wrapper == "none" else f"@{t.wrapper}")
            for t in self.terms
        )
        return f"[{sites}] [{terms}] continuous={self.continuous} seed={self.seed}"


def site_values(site: SiteSpec) -> list[np.ndarray]:
    """The support of each coordinate of `site`, row-major."""
    size = math.prod(site.shape)
    if site.kind == "bernoulli":
        return [np.arange(2)] * size
    if site.kind == "categorical":
        return [np.arange(3)] * size
    if site.kind == "binomial":
        return [np.arange(int(n) + 1) for n in _totals(site).ravel()]
    return [np.arange(site.low, site.high + 1)] * size


def _totals(site: SiteSpec) -> np.ndarray:
    """The Binomial totals of every coordinate, of the site's shape."""
    total = np.asarray(site.total)
    return total.reshape(site.shape) if total.ndim else np.broadcast_to(total, site.shape)


@st.composite
def site_specs(draw, index: int) -> SiteSpec:
    kind = draw(st.sampled_from(SITE_KINDS))
    shape = draw(st.sampled_from(SHAPES))
    in_plate = len(shape) == 1 and draw(st.booleans())
    total, low, high = 0, 0, 0
    if kind == "binomial":
        varying = len(shape) > 0 and draw(st.booleans())
        total = (
            tuple(int(n) for n in 2 + np.arange(math.prod(shape)) % 2)
            if varying
            else draw(st.integers(2, 3))
        )
    if kind == "uniform":
        low = draw(st.integers(-1, 1))
        high = low + draw(st.integers(1, 3))
    return SiteSpec(f"s{index}", kind, shape, in_plate, total, low, high)


@st.composite
def model_specs(draw, continuous: bool | None = None) -> ModelSpec:
    """A random model of at most :data:`MAX_COORDS` coordinates and :data:`MAX_STATES`
    joint states, with at least one term coupling two sites or two coordinates."""
    num_sites = draw(st.integers(1, 3))
    sites = tuple(draw(site_specs(k)) for k in range(num_sites))
    num_states = math.prod(len(v) for site in sites for v in site_values(site))
    num_coords = sum(math.prod(site.shape) for site in sites)
    if not 1 <= num_coords <= MAX_COORDS or num_states > MAX_STATES:
        draw(st.nothing())
    # declared in any order
    sites = tuple(draw(st.permutations(sites)))
    num_terms = draw(st.integers(1, 4))
    terms = tuple(
        TermSpec(
            draw(st.sampled_from(IDIOMS)),
            draw(st.integers(0, num_sites - 1)),
            draw(st.integers(0, num_sites - 1)),
            draw(st.sampled_from(WRAPPERS)),
        )
        for _ in range(num_terms)
    )
    has_continuous = draw(st.booleans()) if continuous is None else continuous
    return ModelSpec(sites, terms, has_continuous, draw(st.integers(0, 2**16)))


# idioms that, with both sites the same, give each coordinate terms of its own
PER_COORDINATE_IDIOMS = ("table", "where", "product", "pair_table", "observed")


@st.composite
def independent_model_specs(draw) -> ModelSpec:
    """A random model with a continuous site whose discrete coordinates are independent
    given it (every term on one coordinate: labels, indicators), of 2 to
    :data:`MAX_COORDS` coordinates."""
    spec = draw(model_specs(continuous=True))
    if spec.num_coords < 2:
        draw(st.nothing())
    num_sites = len(spec.sites)
    terms = []
    for term in spec.terms:
        first = draw(st.integers(0, num_sites - 1))
        idiom = draw(st.sampled_from(PER_COORDINATE_IDIOMS))
        terms.append(TermSpec(idiom, first, first, term.wrapper))
    return spec._replace(terms=tuple(terms))


CHAIN_IDIOMS = ("chain_eq", "chain_sum")


@st.composite
def chain_model_specs(draw) -> ModelSpec:
    """A random model with a continuous site whose discrete coordinates form chains that
    share no term: one or two sites of shape ``(3,)``, every term on one site, at least one
    of them coupling neighbours (``==`` of neighbours, or their products written as one
    sum)."""
    spec = draw(model_specs(continuous=True))
    num_sites = draw(st.integers(1, 2))
    sites = tuple(
        draw(site_specs(k))._replace(shape=(3,), total=draw(st.integers(2, 3)))
        for k in range(num_sites)
    )
    terms = []
    for k, term in enumerate(spec.terms):
        first = draw(st.integers(0, num_sites - 1))
        idioms = CHAIN_IDIOMS if k == 0 else CHAIN_IDIOMS + PER_COORDINATE_IDIOMS
        terms.append(TermSpec(draw(st.sampled_from(idioms)), first, first, term.wrapper))
    spec = spec._replace(sites=sites, terms=tuple(terms))
    if math.prod(len(v) for site in sites for v in site_values(site)) > MAX_STATES:
        draw(st.nothing())
    return spec


# hard constraints, each a factor of 0 or -inf that always leaves a state of positive
# probability: the flattened coordinates of a site non-decreasing (ordered change points), a
# site's values in the lower half of its support (a truncation). Not exclusions (two
# coordinates that must differ): they leave feasible states that single-coordinate moves
# connect only through states of tiny probability ((1, 0) and (0, 1) through (1, 2) and
# (0, 2), at 5e-4), which tests mixing, not exactness.
CONSTRAINT_IDIOMS = ("ordered", "truncated")


@st.composite
def constrained_model_specs(draw) -> ModelSpec:
    """A random discrete-only model with a hard constraint beside its terms."""
    spec = draw(model_specs(continuous=False))
    idiom = draw(st.sampled_from(CONSTRAINT_IDIOMS))
    first = draw(st.integers(0, len(spec.sites) - 1))
    return spec._replace(terms=spec.terms + (TermSpec(idiom, first, first, "none"),))


def _distribution(site: SiteSpec, rng: np.random.Generator, batch: tuple[int, ...]):
    if site.kind == "bernoulli":
        return dist.Bernoulli(probs=jnp.asarray(rng.uniform(0.2, 0.8, batch)))
    if site.kind == "categorical":
        return dist.Categorical(probs=jnp.asarray(rng.dirichlet(np.full(3, 3.0), batch)))
    if site.kind == "binomial":
        total = jnp.asarray(_totals(site))
        return dist.Binomial(total, probs=jnp.asarray(rng.uniform(0.2, 0.8, batch)))
    return dist.DiscreteUniform(site.low, site.high).expand(batch)


def _as_float(value):
    return jnp.asarray(value, jnp.result_type(float))


def _aligned(a, b):
    """The first ``m`` flattened coordinates of both, ``m`` the smaller size."""
    a, b = jnp.ravel(a), jnp.ravel(b)
    m = min(a.shape[0], b.shape[0])
    return a[:m], b[:m]


def _offset(site: SiteSpec):
    return site.low if site.kind == "uniform" else 0


def _num_values(site: SiteSpec) -> int:
    return max(len(v) for v in site_values(site))


def build_model(spec: ModelSpec):
    """The numpyro model of `spec`: sites sampled in their order, then each term as a
    factor or an observed site. Constants (tables, matrices, data) come from `spec.seed`."""
    rng = np.random.default_rng(spec.seed)
    priors = {site.name: _distribution(site, rng, site.shape) for site in spec.sites}
    constants = []
    for term in spec.terms:
        first, second = spec.sites[term.first], spec.sites[term.second]
        n1, n2 = math.prod(first.shape), math.prod(second.shape)
        constants.append(
            dict(
                c=float(rng.normal(0.0, 1.0)),
                table=jnp.asarray(rng.normal(0.0, 1.0, _num_values(first))),
                table2=jnp.asarray(rng.normal(0.0, 1.0, (_num_values(first), _num_values(second)))),
                matrix=jnp.asarray(rng.normal(0.0, 0.5, (n1, n2))),
                threshold=float(rng.uniform(0.0, _num_values(first) - 1)) + _offset(first),
                data=jnp.asarray(rng.normal(0.0, 1.0, max(n1, n2))),
                scale=float(rng.uniform(0.3, 2.0)),
                mask=rng.random(max(n1, n2)) < 0.6,
            )
        )
    y_mu = jnp.asarray(rng.normal(0.5, 1.0, 3))

    def term_value(term: TermSpec, const: dict, values: dict):
        first, second = spec.sites[term.first], spec.sites[term.second]
        a, b = values[first.name], values[second.name]
        af, bf = _as_float(a), _as_float(b)
        c = const["c"]
        idiom = term.idiom
        if idiom == "chain_eq":
            flat = jnp.reshape(a, -1)
            return (
                c * (flat[1:] == flat[:-1]) if flat.shape[0] > 1 else c * (flat == _offset(first))
            )
        if idiom == "table":
            return const["table"][a - _offset(first)]
        if idiom == "pair_table":
            x, y = _aligned(a - _offset(first), b - _offset(second))
            return const["table2"][x, y]
        if idiom == "where":
            return jnp.where(a > const["threshold"], c, -0.5 * c)
        if idiom == "product":
            x, y = _aligned(af, bf)
            return c * x * y
        if idiom == "sum":
            x, y = _aligned(af, bf[::-1] if bf.ndim == 1 else bf)
            return (c * x * y).sum()
        if idiom == "chain_sum":  # a chain's coupling written as one sum
            flat = jnp.reshape(af, -1)
            return c * jnp.sum(flat[1:] * flat[:-1]) if flat.shape[0] > 1 else c * flat.sum()
        if idiom == "sum_of_sums":  # log_prob(x).sum() style, plus a weighted sum
            x, y = _aligned(af, bf)
            return const["table"][a - _offset(first)].sum() + 0.5 * jnp.sum(c * x * y)
        if idiom == "logsumexp":  # truly dense: one term on every coordinate of both sites
            return jax.nn.logsumexp(c * jnp.concatenate([jnp.ravel(af), jnp.ravel(bf)]))
        if idiom == "matmul":
            return 0.5 * jnp.ravel(af) @ const["matrix"] @ jnp.ravel(bf)
        if idiom == "matvec":
            return 0.5 * (const["matrix"] @ jnp.ravel(bf))
        if idiom == "ordered":
            flat = jnp.ravel(a)
            return jnp.where(jnp.all(flat[1:] >= flat[:-1]), 0.0, -jnp.inf)
        if idiom == "truncated":
            half = _offset(first) + (_num_values(first) - 1) // 2
            return jnp.where(a <= half, 0.0, -jnp.inf)
        if idiom == "transpose":
            t = jnp.swapaxes(jnp.atleast_2d(af), 0, 1)
            return c * t[:, :1] * t
        raise ValueError(idiom)

    def model():
        values = {}
        for site in spec.sites:
            if site.in_plate:
                with numpyro.plate(f"plate_{site.name}", site.shape[0]):
                    values[site.name] = numpyro.sample(site.name, priors[site.name])
            else:
                values[site.name] = numpyro.sample(site.name, priors[site.name])
        mu = numpyro.sample("mu", dist.Normal(0.0, 1.0)) if spec.continuous else None
        for k, (term, const) in enumerate(zip(spec.terms, constants, strict=True)):
            if term.idiom == "observed":
                first = spec.sites[term.first]
                loc = const["c"] * jnp.ravel(_as_float(values[first.name]))
                data = const["data"][: loc.shape[0]]
                with _wrapped(term.wrapper, const, loc.shape):
                    numpyro.sample(f"y{k}", dist.Normal(loc, 1.0), obs=data)
                continue
            value = term_value(term, const, values)
            with _wrapped(term.wrapper, const, jnp.shape(value)):
                numpyro.factor(f"f{k}", value)
        if mu is not None:
            # the continuous site sees the discrete ones through an observed site
            first = _as_float(jnp.ravel(values[spec.sites[0].name]))
            loc = mu + 0.7 * first[: y_mu.shape[0]]
            numpyro.sample("y_mu", dist.Normal(loc, 1.0), obs=y_mu[: loc.shape[0]])

    return model


def _wrapped(wrapper: str, const: dict, shape: tuple[int, ...]):
    if wrapper == "scale":
        return handlers.scale(scale=const["scale"])
    if wrapper == "mask" and len(shape) == 1:
        return handlers.mask(mask=jnp.asarray(const["mask"][: shape[0]]))
    return handlers.mask(mask=True)


def enumerated_states(spec: ModelSpec) -> np.ndarray:
    """Every joint value of the discrete sites, flat (sites in declaration order,
    row-major), ``(S, N)``."""
    per_coord = [v for site in spec.sites for v in site_values(site)]
    return np.array(list(itertools.product(*per_coord)), dtype=np.int32)


def unflatten(spec: ModelSpec, flat) -> dict:
    values, start = {}, 0
    for site in spec.sites:
        size = math.prod(site.shape)
        values[site.name] = jnp.reshape(flat[start : start + size], site.shape)
        start += size
    return values


def enumerated_posterior(spec: ModelSpec) -> tuple[np.ndarray, np.ndarray]:
    """The states of :func:`enumerated_states` and their exact posterior probabilities,
    from numpyro's own ``log_density`` (the continuous site, if any, summed out on
    :data:`MU_GRID`)."""
    model = build_model(spec)
    states = enumerated_states(spec)

    def log_joint(flat, mu):
        values = unflatten(spec, flat)
        if spec.continuous:
            values["mu"] = mu
        return log_density(model, (), {}, values)[0]

    if spec.continuous:
        grid = jnp.asarray(MU_GRID)
        per_mu = jax.vmap(lambda flat: jax.vmap(lambda mu: log_joint(flat, mu))(grid))
        log_p = jax.scipy.special.logsumexp(jax.jit(per_mu)(jnp.asarray(states)), axis=1)
    else:
        log_p = jax.jit(jax.vmap(lambda flat: log_joint(flat, 0.0)))(jnp.asarray(states))
    log_p = np.asarray(log_p, np.float64)
    p = np.exp(log_p - log_p.max())
    return states, p / p.sum()


def true_dependencies(log_terms, states: np.ndarray, rng: np.random.Generator, num_points=8):
    """``(E, N)`` boolean: term ``e`` changes when coordinate ``j`` alone changes, found by
    brute force at `num_points` random states of `states`, to every other value the
    enumeration gives coordinate ``j``."""
    terms = jax.jit(log_terms)
    num_coords = states.shape[1]
    values = [np.unique(states[:, j]) for j in range(num_coords)]
    found = None
    for row in rng.choice(len(states), size=min(num_points, len(states)), replace=False):
        x = states[row]
        base = np.asarray(terms(jnp.asarray(x)))
        if found is None:
            found = np.zeros((base.shape[0], num_coords), bool)
        for j in range(num_coords):
            for v in values[j]:
                if v == x[j]:
                    continue
                y = x.copy()
                y[j] = v
                moved = np.asarray(terms(jnp.asarray(y)))
                same = (moved == base) | (np.isneginf(moved) & np.isneginf(base))
                found[:, j] |= ~same
    return found
