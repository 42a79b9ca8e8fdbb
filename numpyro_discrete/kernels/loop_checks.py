"""Whether the kernels' checks run inside numpyro's compiled sampling loop.

Three checks report while a chain runs, from inside the compiled step, through a
``jax.pure_callback`` gated by a ``lax.cond``: the stuck-coordinate check of every discrete
kernel (:mod:`~numpyro_discrete.kernels.stuck_coordinates`), ``ALBP``'s check of its
adaptation at the end of warmup, and ``CollapsedDraw``'s check of a truncated support. A
callback is the only way to warn mid-run with numpyro's progress bar off (numpyro calls no
code of the kernel between its loop's steps), but JAX never writes a program that holds a
host callback to its persistent compilation cache: with the checks on, every process and
every later ``run`` compiles the sampling loop again even where that cache is on.

:func:`enable_loop_checks` turns them off for steps traced afterwards (a new ``MCMC`` or
kernel): the loop then holds no callback, and the persistent cache stores and reloads it.
Measured by ``benchmarks/bench_persistent_cache.py`` (2-core CPU, fresh processes, the
settings alternated, one cache directory each): in the second and third processes, ``ALBP``
on the summed Ising 50 x 50 (1000 + 1000) ran its first run in 4.0-4.5 s with the checks on
and 2.2-2.5 s off, and a later run of 1000 draws in 2.3-2.7 s against 0.3-0.4 s;
``LBPGibbs(NUTS(model))`` on the gallery's mixture (500 + 500) in 8.1-8.6 s against
3.7-5.6 s (numpyro's ``DiscreteHMCGibbs``, cached too, 16.3-18.3 s), later runs 3.3-3.4 s
against 0.5-0.7 s. Sequential chains gain in the first process already, numpyro compiling
its loop again for every chain: four on the mixture, 20.5 s against 12.2 s. The price is
the warnings: a stuck coordinate, a poor adaptation or a truncation that matters is then
not reported.

Example:

.. doctest::

    >>> import numpyro_discrete
    >>> numpyro_discrete.enable_loop_checks(False)
    >>> numpyro_discrete.loop_checks_enabled()
    False
    >>> numpyro_discrete.enable_loop_checks()
"""

__all__ = ["enable_loop_checks", "loop_checks_enabled"]

_enabled = True


def enable_loop_checks(enabled: bool = True) -> None:
    """Compile the kernels' in-run checks (stuck coordinates, ``ALBP``'s adaptation,
    ``CollapsedDraw``'s truncation) into the steps traced from now on, or not.

    :param enabled: ``False`` to leave them out, so that JAX's persistent compilation cache
        can store the sampling loop (it stores no program with a host callback).
    """
    global _enabled
    _enabled = bool(enabled)


def loop_checks_enabled() -> bool:
    """Whether steps traced now compile the in-run checks (:func:`enable_loop_checks`)."""
    return _enabled
