"""The same algorithm at other sizes: axis classes and rebuilding the DAG with new extents.

Dimensions that must stay equal are linked through the algorithm's subscripts: a stage's axis
and the dimension of the stage it defines, and a subscript variable and the tensor dimension it
indexes. Each linked group is one :class:`AxisClass`; resizing moves every member of a class by
the same amount, so ``x[i, j]``, ``gamma[j]``, ``y``'s axis ``j`` and a ``reduce_axis(n)`` over
``xf[i, k]`` change together::

    rmsnorm(8, 1024)  --resize({("y", "i"): 32})-->  rmsnorm(32, 1024)

Constants are kept as they are (``1.0 / n`` in a mean still divides by the old ``n``): a resized
algorithm is a different algorithm with its own numpy reference, not the original one cropped.
A class indexed through a product (``x[2 * i]``) keeps its size.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from ascendsched.algo.algorithm import Algorithm
from ascendsched.algo.check import check_stage_body, children
from ascendsched.algo.expr import (
    Binary,
    Cast,
    Compare,
    Expr,
    IndexArith,
    IndexVar,
    Load,
    Reduce,
    ReduceVar,
    Select,
    Unary,
)
from ascendsched.algo.tensor import Tensor
from ascendsched.errors import AlgorithmError

# A dimension: (tensor name, dim index) of a tensor, or (stage name, var name) of a stage's
# axis or of a reduction variable in the stage's body.
Key = tuple[str, int] | tuple[str, str]


@dataclass(frozen=True)
class AxisClass:
    """Dimensions that change size together; ``sizes`` holds each member's current size."""

    sizes: tuple[tuple[Key, int], ...]
    reduced_over: bool  # some member is a reduction variable
    fixed: bool  # indexed through a product: cannot be resized

    @property
    def members(self) -> frozenset[Key]:
        return frozenset(k for k, _ in self.sizes)


def axis_classes(algo: Algorithm) -> tuple[AxisClass, ...]:
    """The algorithm's dimensions grouped into classes that resize together."""
    return _Classes(algo).classes()


def axis_class(algo: Algorithm, key: Key) -> AxisClass:
    """The class holding ``key`` (a (tensor, dim) or (stage, var) pair)."""
    for c in axis_classes(algo):
        if key in c.members:
            return c
    raise AlgorithmError(f"algorithm '{algo.name}' has no dimension {key!r}; name a tensor "
                         f"dimension as (tensor, index) or a stage variable as (stage, var)")


def resize(algo: Algorithm, sizes: Mapping[Key, int]) -> Algorithm:
    """``algo`` with the class of each key in ``sizes`` moved so that key has the given size.

    Every other member of the class moves by the same amount; classes not named keep their
    sizes. Raises AlgorithmError when two keys of one class disagree, a fixed class would
    change, or a dimension would become smaller than 1."""
    cls = _Classes(algo)
    delta: dict[int, int] = {}
    for key, new in sizes.items():
        root = cls.root(key)
        d = int(new) - cls.size[key]
        if delta.setdefault(root, d) != d:
            raise AlgorithmError(f"resize('{algo.name}'): {key!r} -> {new} disagrees with another "
                                 f"size given for the same axis class; give one size per class")
        if d and root in cls.fixed:
            raise AlgorithmError(f"resize('{algo.name}'): {key!r} is indexed through a product "
                                 f"and keeps its size {cls.size[key]}")
    new_size = {k: s + delta.get(cls.root(k), 0) for k, s in cls.size.items()}
    bad = [k for k, s in new_size.items() if s < 1]
    if bad:
        raise AlgorithmError(f"resize('{algo.name}'): {bad[0]!r} would have size "
                             f"{new_size[bad[0]]}; sizes must stay >= 1")
    if all(new_size[k] == s for k, s in cls.size.items()):
        return algo
    return _rebuild_algorithm(algo, new_size)


# --------------------------------------------------------------------------- classes
class _Classes:
    """Union-find over the algorithm's dimensions (keys), linked through subscripts."""

    def __init__(self, algo: Algorithm) -> None:
        self.parent: dict[Key, Key] = {}
        self.size: dict[Key, int] = {}
        self.reduce_keys: set[Key] = set()
        fixed_keys: set[Key] = set()
        for t in algo.tensors:
            for d, s in enumerate(t.shape):
                self._add((t.name, d), _int(t, s))
            if t.op is None:
                continue
            for d, ax in enumerate(t.op.axes):
                self._add((t.name, ax.name), _int(t, ax.extent))
                self._union((t.name, d), (t.name, ax.name))
            for e in _walk(t.op.body):
                if isinstance(e, ReduceVar):
                    self._add((t.name, e.name), _int(t, e.extent))
                    self.reduce_keys.add((t.name, e.name))
                if isinstance(e, Load):
                    for d, ix in enumerate(e.indices):
                        for v, scaled in _vars(ix):
                            self._union((e.tensor.name, d), (t.name, v.name))
                            if scaled:
                                fixed_keys.add((t.name, v.name))
        self.fixed = {self.root(k) for k in fixed_keys}

    def classes(self) -> tuple[AxisClass, ...]:
        groups: dict[Key, list[Key]] = {}
        for k in self.size:
            groups.setdefault(self.root(k), []).append(k)
        return tuple(
            AxisClass(tuple((k, self.size[k]) for k in ks),
                      any(k in self.reduce_keys for k in ks), r in self.fixed)
            for r, ks in groups.items())

    def root(self, k: Key) -> Key:
        if k not in self.parent:
            raise AlgorithmError(f"no dimension {k!r}; name a tensor dimension as (tensor, "
                                 f"index) or a stage variable as (stage, var)")
        while self.parent[k] != k:
            self.parent[k] = self.parent[self.parent[k]]
            k = self.parent[k]
        return k

    def _add(self, k: Key, size: int) -> None:
        if k not in self.parent:
            self.parent[k] = k
            self.size[k] = size

    def _union(self, a: Key, b: Key) -> None:
        ra, rb = self.root(a), self.root(b)
        if ra != rb:
            self.parent[rb] = ra


def _int(t: Tensor, s: object) -> int:
    if not isinstance(s, int):
        raise AlgorithmError(f"tensor '{t.name}' has symbolic size {s}; resizing needs "
                             f"concrete sizes")
    return s


def _walk(e: Expr):  # noqa: ANN202 -- Iterator[Expr]
    yield e
    if isinstance(e, Reduce):
        yield from e.axes
    for c in children(e):
        yield from _walk(c)


def _vars(ix: Expr, scaled: bool = False) -> list[tuple[IndexVar | ReduceVar, bool]]:
    """Variables in a subscript, each with whether a product scales it."""
    if isinstance(ix, (IndexVar, ReduceVar)):
        return [(ix, scaled)]
    if isinstance(ix, IndexArith):
        s = scaled or ix.op == "mul"
        return _vars(ix.a, s) + _vars(ix.b, s)
    return []


# --------------------------------------------------------------------------- rebuilding
def _rebuild_algorithm(algo: Algorithm, size: dict[Key, int]) -> Algorithm:
    new: dict[str, Tensor] = {}
    for t in algo.tensors:  # producers first
        shape = tuple(size[(t.name, d)] for d in range(t.ndim))
        if t.op is None:
            new[t.name] = Tensor(t.name, shape, t.dtype)
            continue
        axes = tuple(IndexVar(a.name, size[(t.name, a.name)]) for a in t.op.axes)
        env: dict[str, Expr] = {a.name: a for a in axes}
        body = _rebuild_expr(t.op.body, t.name, env, size, new)
        check_stage_body(t.name, axes, body)
        new[t.name] = Tensor(t.name, shape, t.dtype, replace(t.op, axes=axes, body=body))
    return Algorithm(algo.name, tuple(new[o.name] for o in algo.outputs))


def _rebuild_expr(e: Expr, stage: str, env: dict[str, Expr], size: dict[Key, int],
                  new: dict[str, Tensor]) -> Expr:
    def go(x: Expr) -> Expr:
        return _rebuild_expr(x, stage, env, size, new)

    if isinstance(e, IndexVar):
        return env[e.name]
    if isinstance(e, ReduceVar):
        return env.setdefault(f"reduce {e.name}", ReduceVar(e.name, size[(stage, e.name)]))
    if isinstance(e, Load):
        return Load(new[e.tensor.name], tuple(go(i) for i in e.indices), e.dtype)
    if isinstance(e, Reduce):
        return replace(e, body=go(e.body), axes=tuple(go(a) for a in e.axes))  # type: ignore[misc]
    if isinstance(e, (Binary, Compare, IndexArith)):
        return replace(e, a=go(e.a), b=go(e.b))
    if isinstance(e, (Unary, Cast)):
        return replace(e, x=go(e.x))
    if isinstance(e, Select):
        return replace(e, cond=go(e.cond), a=go(e.a), b=go(e.b))
    return e  # Const
