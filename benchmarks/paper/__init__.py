"""Reproduction of the experiments of Sun, Dai and Schuurmans (2022): see ``__main__``."""
