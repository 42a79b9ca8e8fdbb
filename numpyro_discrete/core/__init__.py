"""Pure proposals and adaptation (no numpyro imports): balancing functions, local log-ratio
tables, the LBP-R path proposal and the ALBP path-length adaptation."""
