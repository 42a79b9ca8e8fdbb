"""From a numpyro model (or a potential function) to the flat discrete target: the site
layout (:mod:`~numpyro_discrete.model.layout`), the log density and local-ratio function
(:mod:`~numpyro_discrete.model.potential`), the latent sites
(:mod:`~numpyro_discrete.model.sites`), the structure as written
(:mod:`~numpyro_discrete.model.detection`), each site's ratio mode
(:mod:`~numpyro_discrete.model.ratio_modes`), and the :class:`DiscreteTarget` that joins
them (:mod:`~numpyro_discrete.model.target`), built once per ``init``."""

from numpyro_discrete.model.target import DiscreteTarget

__all__ = ["DiscreteTarget"]
