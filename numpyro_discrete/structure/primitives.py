"""The operations the dependency analysis knows by class: elementwise ones, reductions,
cumulative ones, calls of an inner jaxpr, and those locally constant in their inputs."""

from typing import Any

import jax.numpy as jnp

__all__ = [
    "CALL_JAXPR_PARAMS",
    "CUMULATIVE",
    "ELEMENTWISE",
    "REDUCTIONS",
    "is_locally_constant",
]

# operations whose output element i is computed from the operands' elements i only
ELEMENTWISE = frozenset(
    """abs acos acosh add add_any and asin asinh atan atan2 atanh bessel_i0e bessel_i1e cbrt ceil
    clamp convert_element_type copy copy_p cos cosh digamma div eq erf erf_inv erfc exp exp2
    expm1 floor ge gt igamma igammac imag integer_pow is_finite le lgamma log log1p logistic
    lt max min mul ne neg nextafter not or polygamma population_count pow real
    reduce_precision regularized_incomplete_beta rem round rsqrt select_n shift_left
    shift_right_arithmetic shift_right_logical sign sin sinh sqrt square stop_gradient sub
    tan tanh xor zeta""".split()
)
# operations locally constant in their inputs: a derivative never sees through them
_LOCALLY_CONSTANT = frozenset("eq ne lt le gt ge is_finite sign floor ceil round".split())
REDUCTIONS = frozenset(
    "reduce_sum reduce_max reduce_min reduce_prod reduce_and reduce_or reduce_xor argmax "
    "argmin".split()
)
CUMULATIVE = frozenset("cumsum cumprod cummax cummin cumlogsumexp".split())
# call-like operations: the inner jaxpr's inputs and outputs are the operation's own
CALL_JAXPR_PARAMS = {
    "jit": "jaxpr",
    "pjit": "jaxpr",
    "closed_call": "call_jaxpr",
    "core_call": "call_jaxpr",
    "custom_jvp_call": "call_jaxpr",
    "custom_vjp_call": "call_jaxpr",
    "remat2": "jaxpr",
    "checkpoint": "jaxpr",
}


def is_locally_constant(eqn: Any) -> bool:
    """Whether a derivative never sees through `eqn` (comparisons, rounding, conversions to
    integers or booleans)."""
    if eqn.primitive.name in _LOCALLY_CONSTANT:
        return True
    if eqn.primitive.name == "convert_element_type":
        return not jnp.issubdtype(eqn.params["new_dtype"], jnp.inexact)
    return False
