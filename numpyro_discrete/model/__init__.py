"""From a numpyro model (or a potential function) to the flat discrete target: site layout
and log density."""
