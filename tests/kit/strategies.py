"""Hypothesis strategies: random vector algorithms and random legal schedules for them.

An expression is first drawn as a *recipe* (nested tuples), then realised inside ``compute``
where the index variables exist.
"""

from __future__ import annotations

from hypothesis import strategies as st

from ascendsched.algo import (
    abs_,
    algorithm,
    compute,
    exp,
    maximum,
    minimum,
    placeholder,
    reduce_axis,
    reduce_max,
    reduce_sum,
    relu,
    sqrt,
    where,
)
from ascendsched.schedule import Schedule

FLOAT_UNARY = ("abs", "relu", "neg", "exp", "sqrtabs")
INT_UNARY = ("relu", "neg")
BINARY = ("add", "sub", "mul", "max", "min")


@st.composite
def recipes(draw, n_leaves: int, is_float: bool, depth: int):
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return ("leaf", draw(st.integers(0, n_leaves - 1)))
    kind = draw(st.sampled_from(("unary", "binary", "binary", "select") if is_float
                                else ("unary", "binary", "binary")))
    a = draw(recipes(n_leaves, is_float, depth - 1))
    if kind == "unary":
        return ("unary", draw(st.sampled_from(FLOAT_UNARY if is_float else INT_UNARY)), a)
    if draw(st.integers(0, 3)) == 0:
        b = ("const", draw(st.sampled_from([0.5, 2.0, -1.5, 3.0]) if is_float
                           else st.integers(-9, 9)))
    else:
        b = draw(recipes(n_leaves, is_float, depth - 1))
    if kind == "select":
        return ("select", a, b)
    return ("binary", draw(st.sampled_from(BINARY)), a, b, draw(st.booleans()))


def realise(r, leaves):
    """Build the expression of recipe ``r``; ``leaves[n]`` is an Expr."""
    tag = r[0]
    if tag == "leaf":
        return leaves[r[1]]
    if tag == "const":
        return r[1]
    if tag == "unary":
        x = realise(r[2], leaves)
        return {"abs": abs_, "relu": relu, "neg": lambda v: -v,
                "exp": lambda v: exp(minimum(v, 4.0)), "sqrtabs": lambda v: sqrt(abs_(v))}[r[1]](x)
    a, b = realise(r[1] if tag == "select" else r[2], leaves), \
        realise(r[2] if tag == "select" else r[3], leaves)
    if tag == "select":
        return where(a > b, a, b * 0.5) if not isinstance(b, (int, float)) else where(a > b, a, -a)
    if tag == "binary" and r[4] and not isinstance(b, (int, float)):
        a, b = b, a
    op = r[1]
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    return maximum(a, b) if op == "max" else minimum(a, b)


@st.composite
def vector_cases(draw, compute_dtypes: tuple[str, ...] = ("float16", "float32", "int32")):
    """(algorithm, schedule) pairs: elementwise chains, optional row reduction, casts. Sizes
    large enough for many tiles with tails on many cores (1-D up to 20000 elements, 2-D up to
    64 x 1200). ``compute_dtypes``: the dtypes the expression may compute in."""
    rank = 2 if _likely(draw) else 1
    shape = (draw(st.integers(1, 20000)),) if rank == 1 else \
        (draw(st.integers(1, 64)), draw(st.integers(1, 1200)))
    cdt = draw(st.sampled_from(compute_dtypes))
    in_dtypes = draw(st.lists(st.sampled_from(("float16", "float32") if cdt != "int32"
                                              else ("int32",)), min_size=1, max_size=3))
    inputs = [placeholder(f"in{n}", shape, d) for n, d in enumerate(in_dtypes)]
    row_vec = placeholder("rv", (shape[1],), in_dtypes[0]) \
        if rank == 2 and _likely(draw) else None
    n_leaves = len(inputs) + (1 if row_vec is not None else 0)
    recipe = draw(recipes(n_leaves, cdt != "int32", draw(st.integers(1, 4))))
    out_dtype = draw(st.sampled_from(("float16", "float32") if cdt != "int32" else ("int32",)))

    def leaves(ix):
        ls = [t[ix] if t.dtype.name == cdt else t[ix].astype(cdt) for t in inputs]
        if row_vec is not None:
            ld = row_vec[ix[-1]]
            ls.append(ld if row_vec.dtype.name == cdt else ld.astype(cdt))
        return ls

    def body(*ix):
        e = realise(recipe, leaves(ix))
        return e * 1 if isinstance(e, (int, float)) else e

    stage = compute("t0", shape, body)
    reduce = rank == 2 and cdt != "int32" and _likely(draw)
    if reduce:
        k = reduce_axis(shape[1], "k")
        red = reduce_sum if draw(st.booleans()) else reduce_max
        r = compute("r", (shape[0],), lambda i: red(stage[i, k].astype("float32"), k))
        y = compute("y", shape, lambda i, j: _to(stage[i, j].astype("float32") - r[i], out_dtype))
    else:
        y = compute("y", shape, lambda *ix: _to(stage[ix], out_dtype))
    algo = algorithm("prop", y)
    return algo, draw(schedules(algo, rank))


def _likely(draw) -> bool:
    """True three times in four (hypothesis otherwise favours the simplest choice)."""
    return draw(st.integers(0, 3)) != 0


def _to(e, dtype):
    return e.astype(dtype)


@st.composite
def schedules(draw, algo, rank: int):
    out = algo.outputs[0]
    shape = [int(s) for s in out.shape]
    s = Schedule(algo)
    axes = [a.name for a in out.op.axes]
    # a tile count per axis (the factor leaves a tail unless it divides), so the IR run stays
    # small at any size; long rows are always split
    if rank == 2 and shape[0] > 1 and _likely(draw):
        tiles = draw(st.integers(1, min(shape[0], 12)))
        s = s.split(out.name, axes[0], -(-shape[0] // tiles))
    if shape[-1] >= 16 and (shape[-1] > 2048 or _likely(draw)):
        tiles = draw(st.integers(max(1, -(-shape[-1] // 2048)), max(1, min(10, shape[-1] // 16))))
        per = -(-shape[-1] // tiles)  # columns per tile, rounded up to 32 B of fp16
        s = s.split(out.name, axes[-1], min(-(-per // 16) * 16, shape[-1] // 16 * 16))
    loops = s.loop_names(out.name)
    if len(loops) == 2 and _likely(draw):
        s = s.reorder(out.name, loops[1], loops[0])
        loops = s.loop_names(out.name)
    if len(loops) == 2 and _likely(draw):
        s = s.fuse(out.name, loops[0], loops[1])
        loops = s.loop_names(out.name)
    if loops and _likely(draw):
        s = s.bind(out.name, loops[0], draw(st.integers(1, 48)))
    at = s.legal_compute_at(out.name)[0]
    for stg in algo.stages:
        if stg is out:
            continue
        if stg.name == "r" or _likely(draw):
            s = s.compute_at(stg.name, out.name, at)
        else:
            s = s.compute_inline(stg.name)
    for t in list(algo.inputs) + [out]:
        if _likely(draw):
            s = s.buffer(t.name, 2)
    return s
