"""Code the full and tail versions of a fused tile loop's last axis share, run once.

``build_loop_nest`` gives a fused tile loop one guarded version per combination of full and
tail tiles of its axes (``if i full and j full: ...``, ``if i full and j tail: ...``). A stage
computed per tile whose box does not depend on the last axis (a row statistic of a tile of
rows x columns) is then generated once per version, the same instructions in each. This pass
runs such code once, between the guards of the last axis: of each pair of versions that differ
in the last axis alone, the statements both run (the same up to the names of their own loops)
move before the two guards, where nothing each version runs before them touches what they
touch::

    if i full and j full: load x; load gamma[j full]; stats(x); y[j full]
    if i full and j tail: load x; load gamma[j tail]; stats(x); y[j tail]
->  if i full: load x; stats(x)
               if j full: load gamma[j full]; y[j full]
               if j tail: load gamma[j tail]; y[j tail]

Each trip still runs what its version ran, with the shared statements earlier only past
statements they share no tensor with (so no dependence changes order), and the two guards of
the last axis, exclusive and exhaustive within the loop, still pick one version. Only shared
code that computes moves (shared loads alone stay in their versions). The kernel has fewer
statements for the sync passes, whose cost grows with their square (a hand RMSNorm 300 x 5000
of fused 8 x 2048 tiles, its row statistic in chunks: 130 -> 88 statements, 16.7 -> 5.2 s of
lowering), and the last axis's own loads are no longer live in UB while the shared statistic
runs (a softmax 100 x 3000 in fused 64 x 256 tiles that overflowed UB fits).
"""

from __future__ import annotations

from ascendsched.lower.affine import Cond
from ascendsched.lower.ir import For, If, Instr, Stmt, iter_instrs
from ascendsched.lower.substitute import map_affines, mapped_cond
from ascendsched.target import Pipe

Version = tuple[tuple[Cond, ...], list[Stmt], str]  # (guard conditions, body, comment)


def shared_once(versions: list[Version], shared_comment: dict[tuple[Cond, ...], str],
                last_comment: dict[Cond, str]) -> list[Stmt]:
    """The versions of one fused tile loop (in ``itertools.product`` order of their axes' full
    and tail kinds, the last axis varying fastest; their guards exhaustive within the loop) as
    guarded statements, each pair differing in its last condition alone with what both run
    moved before its two guards (module docstring). ``shared_comment``: the comment of a
    pair's guard on the other axes (by those conditions); ``last_comment``: the comment of a
    last-axis guard."""
    out: list[Stmt] = []
    k = 0
    while k < len(versions):
        conds, body, comment = versions[k]
        if k + 1 < len(versions) and _pair(conds, versions[k + 1][0]):
            other_conds, other, _ = versions[k + 1]
            common, rest, other_rest = _hoisted(body, other)
            if _computes(common):
                inner = common + [If((c,), tuple(b), last_comment[c])
                                  for c, b in ((conds[-1], rest), (other_conds[-1], other_rest))
                                  if b]
                out.extend([If(conds[:-1], tuple(inner), shared_comment[conds[:-1]])]
                           if conds[:-1] else inner)
                k += 2
                continue
        out.extend([If(conds, tuple(body), comment)] if conds else body)
        k += 1
    return out


def _computes(body: list[Stmt]) -> bool:
    """Whether ``body`` computes anything (an instruction on the Vector pipe): shared loads
    alone stay in their versions (a bias row both row versions load: one statement saved, a
    guard more)."""
    return any(i.pipe == Pipe.V for i, _ in iter_instrs(tuple(body)))


def _pair(a: tuple[Cond, ...], b: tuple[Cond, ...]) -> bool:
    """Whether two versions' guards differ in the last condition alone, on one expression."""
    return (bool(a) and len(a) == len(b) and a[:-1] == b[:-1] and a[-1].lhs == b[-1].lhs
            and a[-1] != b[-1])


def _hoisted(xs: list[Stmt], ys: list[Stmt]) -> tuple[list[Stmt], list[Stmt], list[Stmt]]:
    """(the statements both lists run that may move before the rest, as ``xs`` has them; the
    rest of ``xs``; the rest of ``ys``): a longest common subsequence of the two (statements
    equal up to their own loop names), keeping in order those that share no tensor with a
    statement left before them in either list."""
    tx, ty = [_touched(s) for s in xs], [_touched(s) for s in ys]
    keep_x: set[int] = set()
    keep_y: set[int] = set()
    for i, j in _common(xs, ys):
        if any(_conflict(tx[i], tx[n]) for n in range(i) if n not in keep_x) or any(
                _conflict(ty[j], ty[n]) for n in range(j) if n not in keep_y):
            continue
        keep_x.add(i)
        keep_y.add(j)
    return ([s for n, s in enumerate(xs) if n in keep_x],
            [s for n, s in enumerate(xs) if n not in keep_x],
            [s for n, s in enumerate(ys) if n not in keep_y])


def _common(xs: list[Stmt], ys: list[Stmt]) -> list[tuple[int, int]]:
    """Index pairs of a longest common subsequence of ``xs`` and ``ys`` under ``_same``."""
    n, m = len(xs), len(ys)
    eq = [[_same(x, y, {}) for y in ys] for x in xs]
    best = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            best[i][j] = best[i + 1][j + 1] + 1 if eq[i][j] else \
                max(best[i + 1][j], best[i][j + 1])
    out, i, j = [], 0, 0
    while i < n and j < m:
        if eq[i][j] and best[i][j] == best[i + 1][j + 1] + 1:
            out.append((i, j))
            i, j = i + 1, j + 1
        elif best[i + 1][j] >= best[i][j + 1]:
            i += 1
        else:
            j += 1
    return out


def _same(x: Stmt, y: Stmt, names: dict[str, str]) -> bool:
    """Whether ``y`` is ``x`` with the loops inside it renamed (``names``: ``y``'s loop
    variables so far -> ``x``'s, ``Affine.rename``)."""
    if type(x) is not type(y):
        return False
    if isinstance(x, For):
        assert isinstance(y, For)
        inner = {**names, y.var: x.var}
        return (x.extent == y.extent and x.comment == y.comment and len(x.body) == len(y.body)
                and all(_same(a, b, inner) for a, b in zip(x.body, y.body, strict=True)))
    if isinstance(x, If):
        assert isinstance(y, If)
        return (x.comment == y.comment and len(x.body) == len(y.body)
                and x.conds == tuple(mapped_cond(c, lambda e: e.rename(names)) for c in y.conds)
                and all(_same(a, b, names) for a, b in zip(x.body, y.body, strict=True)))
    assert isinstance(x, Instr) and isinstance(y, Instr)
    return map_affines(y, lambda e: e.rename(names)) == x if names else y == x


def _touched(s: Stmt) -> tuple[set[str], set[str]]:
    """The tensors (buffers and GM tensors) ``s`` reads and writes."""
    instrs = [i for i, _ in iter_instrs((s,))]
    return ({r.tensor for i in instrs for r in i.reads},
            {r.tensor for i in instrs for r in i.writes})


def _conflict(a: tuple[set[str], set[str]], b: tuple[set[str], set[str]]) -> bool:
    """Whether two statements may depend on each other: one writes a tensor the other
    touches."""
    return bool(a[1] & (b[0] | b[1]) or b[1] & a[0])
