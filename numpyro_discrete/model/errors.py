"""The error of the model layer: :class:`ModelError`, raised where a model, its arguments or a
kernel's arguments cannot be sampled as given. Its message names the site, the problem and
the fix; the kernel that reads the model adds its own name (:func:`named_model_errors`)."""

from collections.abc import Iterator
import contextlib

__all__ = ["ModelError", "named_model_errors"]


class ModelError(ValueError):
    """A model (or ``potential_fn``), its arguments or a kernel's arguments that cannot be
    sampled as given. :attr:`kernel_name` is the kernel that met it, once one has named
    itself (:func:`named_model_errors`)."""

    kernel_name: str | None = None


@contextlib.contextmanager
def named_model_errors(kernel_name: str) -> Iterator[None]:
    """Re-raise a :class:`ModelError` from the block with `kernel_name` before its message
    (``"ALBP: Site 'x' ..."``); one already named by the kernel that met it (a kernel
    chosen by another) passes unchanged."""
    try:
        yield
    except ModelError as error:
        if error.kernel_name is not None:
            raise
        named = ModelError(f"{kernel_name}: {error}")
        named.kernel_name = kernel_name
        raise named.with_traceback(error.__traceback__) from None
