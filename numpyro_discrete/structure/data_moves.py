"""Data movement on dependency sets: each rule applies a data-moving operation (reshape,
slice, gather-free indexing, concatenation, padding, ...) to the integer arrays of sets, as
the operation moves the values; the start indices a dynamic slice reads are forced."""

from collections.abc import Callable
from typing import Any

import numpy as np

from numpyro_discrete.structure.lazy_values import force

__all__ = ["DATA_MOVES", "PAD", "READS_VALUES", "data_operands", "padded"]

PAD = -1
"""The padding of a set (no coordinate)."""


def padded(sets: np.ndarray | None, shape: tuple, width: int) -> np.ndarray:
    """`sets` broadcast to `shape`, padded to `width` slots (``None``: no dependency)."""
    if sets is None:
        return np.full(shape + (width,), PAD, np.int32)
    sets = np.broadcast_to(sets, shape + sets.shape[-1:])
    extra = width - sets.shape[-1]
    if extra:
        sets = np.concatenate([sets, np.full(shape + (extra,), PAD, sets.dtype)], axis=-1)
    return sets


def data_operands(name: str, num_operands: int) -> tuple[int, ...]:
    if name in ("concatenate", "stack"):
        return tuple(range(num_operands))
    return {"dynamic_update_slice": (0, 1), "pad": (0, 1)}.get(name, (0,))


def _broadcast_in_dim(sets: list, values: list, params: dict) -> np.ndarray:
    operand = sets[0]
    shape = tuple(params["shape"])
    expanded = [1] * len(shape)
    for axis, size in zip(params["broadcast_dimensions"], operand.shape[:-1], strict=True):
        expanded[axis] = size
    return np.broadcast_to(operand.reshape(expanded + [-1]), shape + operand.shape[-1:])


def _reshape(sets: list, values: list, params: dict) -> np.ndarray:
    operand = sets[0]
    if params.get("dimensions") is not None:
        operand = np.transpose(operand, tuple(params["dimensions"]) + (operand.ndim - 1,))
    return operand.reshape(tuple(params["new_sizes"]) + operand.shape[-1:])


def _slice(sets: list, values: list, params: dict) -> np.ndarray:
    strides = params.get("strides") or (1,) * len(params["start_indices"])
    index = tuple(
        slice(start, limit, stride)
        for start, limit, stride in zip(
            params["start_indices"], params["limit_indices"], strides, strict=True
        )
    )
    return sets[0][index]


def _clamped_starts(values: list, shape: tuple, sizes: tuple) -> tuple:
    starts = [int(np.asarray(force(v))) for v in values]
    return tuple(
        slice(min(max(start, 0), dim - size), min(max(start, 0), dim - size) + size)
        for start, dim, size in zip(starts, shape, sizes, strict=True)
    )


def _dynamic_slice(sets: list, values: list, params: dict) -> np.ndarray:
    operand = sets[0]
    return operand[_clamped_starts(values[1:], operand.shape[:-1], tuple(params["slice_sizes"]))]


def _dynamic_update_slice(sets: list, values: list, params: dict) -> np.ndarray:
    operand, update = np.array(sets[0]), sets[1]
    operand[_clamped_starts(values[2:], operand.shape[:-1], update.shape[:-1])] = update
    return operand


def _pad(sets: list, values: list, params: dict) -> np.ndarray:
    operand, padding = sets
    config = params["padding_config"]
    shape = tuple(
        lo + hi + n + max(n - 1, 0) * interior
        for (lo, hi, interior), n in zip(config, operand.shape[:-1], strict=True)
    )
    out = np.array(np.broadcast_to(padding, shape + operand.shape[-1:]))
    source, target = [], []
    for (lo, _, interior), n, size in zip(config, operand.shape[:-1], shape, strict=True):
        position = lo + np.arange(n) * (interior + 1)
        inside = (position >= 0) & (position < size)
        source.append(np.flatnonzero(inside))
        target.append(position[inside])
    out[np.ix_(*target, np.arange(out.shape[-1]))] = operand[
        np.ix_(*source, np.arange(operand.shape[-1]))
    ]
    return out


def _split(sets: list, values: list, params: dict) -> list:
    boundaries = np.cumsum(params["sizes"])[:-1]
    return np.split(sets[0], boundaries, axis=params["axis"])


# the data moves that read the values of their other operands (start indices)
READS_VALUES = frozenset({"dynamic_slice", "dynamic_update_slice"})

DATA_MOVES: dict[str, Callable[[list, list, dict], Any]] = {
    "broadcast_in_dim": _broadcast_in_dim,
    "reshape": _reshape,
    "transpose": lambda s, v, p: np.transpose(s[0], tuple(p["permutation"]) + (s[0].ndim - 1,)),
    "squeeze": lambda s, v, p: np.squeeze(s[0], axis=tuple(p["dimensions"])),
    "expand_dims": lambda s, v, p: np.expand_dims(s[0], axis=tuple(p["dimensions"])),
    "rev": lambda s, v, p: np.flip(s[0], axis=tuple(p["dimensions"])),
    "slice": _slice,
    "concatenate": lambda s, v, p: np.concatenate(s, axis=p["dimension"]),
    "stack": lambda s, v, p: np.stack(s, axis=p["axis"]),
    "pad": _pad,
    "dynamic_slice": _dynamic_slice,
    "dynamic_update_slice": _dynamic_update_slice,
    "split": _split,
}
