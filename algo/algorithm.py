"""An algorithm: the DAG of stages reachable from its outputs, in topological order."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from ascendsched.algo.check import children
from ascendsched.algo.expr import Expr, Load
from ascendsched.algo.tensor import Tensor
from ascendsched.algo.validate import check_name
from ascendsched.errors import AlgorithmError


@dataclass(frozen=True, eq=False)
class Algorithm:
    """Named outputs plus everything they depend on. ``stages`` are computed tensors."""

    name: str
    outputs: tuple[Tensor, ...]

    def __post_init__(self) -> None:
        check_name("algorithm", self.name)
        if not self.outputs:
            raise AlgorithmError(f"algorithm '{self.name}' has no outputs; pass the computed "
                                 f"tensors to store: algorithm('{self.name}', [y])")
        for o in self.outputs:
            if not isinstance(o, Tensor) or o.is_placeholder:
                raise AlgorithmError(
                    f"algorithm '{self.name}': output {o!r} must be a computed tensor (made by "
                    f"compute()); an input needs no kernel, copy it with compute('y', shape, "
                    f"lambda i: x[i])")
        names = {t.name for t in self.tensors}  # runs the cycle and name checks
        if self.name in names:
            raise AlgorithmError(
                f"algorithm '{self.name}' has a tensor of the same name; the kernel function and "
                f"its tensors share one C++ scope: rename the algorithm, e.g. "
                f"'{self.name}_kernel'")
        for n in names:
            for suffix in ("_gm", "_ub"):
                if n.endswith(suffix) and n[:-len(suffix)] in names:
                    raise AlgorithmError(
                        f"algorithm '{self.name}': tensor '{n}' clashes with the {suffix[1:].upper()}"
                        f" buffer the kernel declares for tensor '{n[:-len(suffix)]}'; rename it")

    @cached_property
    def tensors(self) -> tuple[Tensor, ...]:
        """Every tensor, producers before consumers."""
        order: list[Tensor] = []
        state: dict[int, int] = {}  # id -> 1 visiting, 2 done
        by_name: dict[str, Tensor] = {}

        def visit(t: Tensor, path: tuple[str, ...]) -> None:
            s = state.get(id(t))
            if s == 2:
                return
            if s == 1:
                cycle = " -> ".join(path[path.index(t.name):] + (t.name,))
                raise AlgorithmError(
                    f"algorithm '{self.name}': stages form a cycle ({cycle}); a stage cannot "
                    f"depend on itself through its consumers")
            other = by_name.get(t.name)
            if other is not None and other is not t:
                raise AlgorithmError(
                    f"algorithm '{self.name}': two different tensors are named '{t.name}'; "
                    f"give every placeholder and stage a unique name")
            by_name[t.name] = t
            state[id(t)] = 1
            for p in producers(t):
                visit(p, path + (t.name,))
            state[id(t)] = 2
            order.append(t)

        for o in self.outputs:
            visit(o, ())
        return tuple(order)

    @property
    def stages(self) -> tuple[Tensor, ...]:
        return tuple(t for t in self.tensors if not t.is_placeholder)

    @property
    def inputs(self) -> tuple[Tensor, ...]:
        return tuple(t for t in self.tensors if t.is_placeholder)

    def tensor(self, name: str) -> Tensor:
        for t in self.tensors:
            if t.name == name:
                return t
        raise AlgorithmError(
            f"algorithm '{self.name}' has no tensor '{name}'; it has "
            f"{', '.join(t.name for t in self.tensors)}")

    def consumers(self, t: Tensor) -> tuple[Tensor, ...]:
        return tuple(s for s in self.stages if t in producers(s))

    def __str__(self) -> str:
        from ascendsched.algo.printer import format_algorithm

        return format_algorithm(self)


def producers(t: Tensor) -> tuple[Tensor, ...]:
    """Tensors loaded by ``t``'s body, in first-use order, without duplicates."""
    if t.op is None:
        return ()
    out: list[Tensor] = []
    for load in loads(t.op.body):
        if load.tensor not in out:
            out.append(load.tensor)
    return tuple(out)


def upstream(t: Tensor) -> set[Tensor]:
    """Every tensor ``t`` reads, directly or through other stages."""
    seen: set[Tensor] = set()
    todo = list(producers(t))
    while todo:
        p = todo.pop()
        if p not in seen:
            seen.add(p)
            todo.extend(producers(p))
    return seen


def root_output(algo: Algorithm) -> Tensor:
    """The output a schedule tiles (splits, binds, fuses): the first output that no other
    output reads, of the highest rank. The other outputs are computed in its tile and stored
    from there (e.g. quantised values ``q[i, j]`` and their row scale ``s[i]``, which ``q``
    reads: ``q`` is the root)."""
    outs = algo.outputs
    free = [o for o in outs if not any(o in upstream(p) for p in outs if p is not o)]
    cands = free or list(outs)
    return max(cands, key=lambda o: (len(o.shape), -outs.index(o)))


def loads(e: Expr) -> list[Load]:
    """Every Load in ``e`` in evaluation order."""
    acc: list[Load] = []
    todo = [e]  # an explicit stack, not a recursive closure: no reference cycle per call
    while todo:
        x = todo.pop()
        if isinstance(x, Load):
            acc.append(x)
        todo.extend(reversed(children(x)))
    return acc


def algorithm(name: str, outputs: Tensor | Sequence[Tensor]) -> Algorithm:
    """The algorithm computing ``outputs`` (one tensor or several) and everything they read."""
    if isinstance(outputs, str) or not isinstance(outputs, (Tensor, Sequence)):
        raise AlgorithmError(
            f"algorithm '{name}': outputs must be a computed tensor or a list of them, got "
            f"{outputs!r}")
    outs = (outputs,) if isinstance(outputs, Tensor) else tuple(outputs)
    return Algorithm(name, outs)
