"""The algorithm language: pure tensor expressions and their numpy reference."""

from ascendsched.algo.algorithm import Algorithm, algorithm, producers
from ascendsched.algo.evaluate import evaluate
from ascendsched.algo.expr import Expr, cast
from ascendsched.algo.ops import (
    abs_,
    clip,
    eq,
    exp,
    log,
    maximum,
    minimum,
    ne,
    pow_,
    reciprocal,
    reduce_max,
    reduce_min,
    reduce_sum,
    relu,
    round_,
    rsqrt,
    select,
    sigmoid,
    sqrt,
    tanh,
    where,
)
from ascendsched.algo.tensor import Tensor, compute, placeholder, reduce_axis

__all__ = [
    "Algorithm", "Expr", "Tensor", "abs_", "algorithm", "cast", "compute", "eq", "evaluate",
    "exp", "log", "maximum", "minimum", "ne", "placeholder", "producers", "reciprocal",
    "reduce_axis", "reduce_max", "reduce_min", "reduce_sum", "relu", "rsqrt", "select", "sqrt",
    "where", "clip", "pow_", "round_", "sigmoid", "tanh",
]
