"""The structure of a log density written as a sum of terms: which coordinates each term
depends on (:mod:`~numpyro_discrete.structure.dependencies`, read from the traced program)
and a colouring of the coordinates' interaction graph
(:mod:`~numpyro_discrete.structure.colouring`). Pure JAX, numpy, scipy and networkx: no
numpyro."""
