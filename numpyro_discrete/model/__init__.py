"""From a numpyro model (or a potential function) to the flat discrete target: the site
layout (:mod:`~numpyro_discrete.model.layout`), the log density and local-ratio function
(:mod:`~numpyro_discrete.model.potential`), and the :class:`DiscreteTarget` that joins them
(:mod:`~numpyro_discrete.model.target`), built once per ``init``."""

from numpyro_discrete.model.target import DiscreteTarget

__all__ = ["DiscreteTarget"]
