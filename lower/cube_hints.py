"""The schedule decisions behind a Cube kernel's CapacityError and the way out, in the spelling
the user wrote: ``GemmSchedule`` calls (``.tile(128, 256, 128)``, ``.buffer('l1', 1)``) or the
general ``Schedule``'s directives (``.split('C', 'k', 128)``, ``.cache_read('A', 'L1', ...,
copies=1)``), whose names the plan keeps (``CubePlan.written``)."""

from __future__ import annotations

from ascendsched.errors import CapacityError
from ascendsched.schedule.cube_plan import CubePlan, Written
from ascendsched.target import Scope, Target

_WHAT = {"m": "tile m", "n": "tile n", "k": "the L1 K step", "k0": "the L0 K step"}


def where(plan: CubePlan) -> str:
    """Which schedule a message is about."""
    w = plan.written
    if w is None:
        return f"In GEMM schedule ({plan.spec})"
    return f"In schedule for '{plan.algo.name}', tensorized stage '{w.stage}' ({plan.spec})"


def capacity_hint(plan: CubePlan, err: CapacityError) -> CapacityError:
    """The planner's CapacityError plus the schedule decisions that size the buffers of the
    overflowing scope, and the way out."""
    t, sp = plan.tiling, plan.spec
    eb, ab = sp.in_dtype.bytes, sp.acc_dtype.bytes
    bt = plan.target.scope(Scope.BT).usable // ab
    sizes = {
        "L1": f"a_l1 + b_l1 = ({t.tm} x {t.tk} + {t.tk} x {t.tn}) x {eb} B x {t.l1_copies} "
              f"copies",
        "L0A": f"a_l0 = {t.tm} x {t.k0} x {eb} B x {t.l0_copies} copies",
        "L0B": f"b_l0 = {t.k0} x {t.tn} x {eb} B x {t.l0_copies} copies",
        "L0C": f"c_l0 = {t.tm} x {t.tn} x {ab} B x {t.l0c_copies} copies",
        "BT": f"bias_bt = {t.tn} x {ab} B (the tile's n columns of bias)",
    }
    msg = str(err)
    scope = next((s for s in sizes if f": {s} buffers need" in msg), None)
    if scope is None:
        return err
    w = plan.written
    cause, fix = _gemm_why(plan, scope, bt) if w is None else _general_why(plan, w, scope, bt)
    return CapacityError(f"{msg}\n{where(plan)}: {sizes[scope]}, from {cause}. Try {fix}.")


def mixed_capacity_hint(plan: CubePlan, err: CapacityError) -> CapacityError:
    """``capacity_hint`` of the Cube path, and for UB the Vector epilogue's step that sized
    its buffers and the way out."""
    msg = str(err)
    if ": UB buffers need" not in msg:
        return capacity_hint(plan, err)
    rows, t, vc = plan.epilogue_rows, plan.tiling, plan.epilogue_vector_cores
    keep = f", vector_cores={vc}" if vc != 2 else ""  # the fix keeps the user's Vector cores
    asked = (f", rows={rows}" if rows else "") + keep
    fewer = max(1, (rows or -(-t.tm // vc)) // 2)  # rows count one Vector core's share
    step = (f"the Vector epilogue's step of {rows or 'as many rows as UB was estimated to hold'}"
            f" x {t.tn} columns (its loads, its output and its temporaries)")
    w = plan.written
    if w is None:
        return CapacityError(
            f"{msg}\n{where(plan)}: {step}, from .epilogue_on('vector'{asked}) and the tile's "
            f"n={t.tn}. Try .epilogue_on('vector', rows={fewer}{keep}) or a smaller tile n")
    epi = plan.vector_epilogue
    narrower = "" if epi is not None and epi.rowwise else f" or {_smaller(plan, w, ('n',))}"
    return CapacityError(
        f"{msg}\n{where(plan)}: {step}, from {_places(w, asked)} and {_decided(plan, w, 'n')}. "
        f"Try {_places(w, f', rows={fewer}{keep}')}{narrower}")


def bias_table_error(plan: CubePlan, target: Target) -> CapacityError:
    """A tile's bias row does not fit the bias table."""
    t, ab = plan.tiling, plan.spec.acc_dtype.bytes
    bt = target.scope(Scope.BT).usable
    w = plan.written
    cause, fix = (f".tile(..., n={t.tn}, ...)", f"a tile n <= {bt // ab}") if w is None else \
        _general_why(plan, w, "BT", bt // ab)
    return CapacityError(
        f"{where(plan)}: the bias row of a tile, n={t.tn} x {ab} B, does not fit the "
        f"{target.name} bias table ({bt} B, bias_bt), from {cause}. Try {fix}")


def narrower_tile(plan: CubePlan) -> str:
    """How to make the tile narrower (fewer columns, n). (An epilogue reducing along rows
    reads rows UB cannot hold in chunks instead: ``build_mixed._chunked_rows``.)"""
    w = plan.written
    if w is None:
        return "a smaller tile n"
    return _smaller(plan, w, ("n",))


# --------------------------------------------------------------------------- GemmSchedule
def _gemm_why(plan: CubePlan, scope: str, bt: int) -> tuple[str, str]:
    t = plan.tiling

    def fewer(level: str, copies: int) -> str:
        return f", or .buffer('{level}', 1)" if copies > 1 else ""

    return {
        "L1": (f".tile({t.tm}, {t.tn}, {t.tk}) and .buffer('l1', {t.l1_copies})",
               "a smaller tile k (or m, n)" + fewer("l1", t.l1_copies)),
        "L0A": (f"the tile's m={t.tm}, .split_k({t.k0}) and .buffer('l0', {t.l0_copies})",
                "a smaller split_k or tile m" + fewer("l0", t.l0_copies)),
        "L0B": (f"the tile's n={t.tn}, .split_k({t.k0}) and .buffer('l0', {t.l0_copies})",
                "a smaller split_k or tile n" + fewer("l0", t.l0_copies)),
        "L0C": (f"the tile's m x n and .buffer('l0c', {t.l0c_copies})",
                "a smaller tile m or n" + fewer("l0c", t.l0c_copies)),
        "BT": (f"the tile's n={t.tn}", f"a tile n <= {bt}"),
    }[scope]


# --------------------------------------------------------------------------- general Schedule
def _general_why(plan: CubePlan, w: Written, scope: str, bt: int) -> tuple[str, str]:
    t = plan.tiling
    uses = {"L1": ("m", "n", "k"), "L0A": ("m", "k0"), "L0B": ("n", "k0"), "L0C": ("m", "n"),
            "BT": ("n",)}[scope]
    level, copies = {"L1": ("l1", t.l1_copies), "L0A": ("l0", t.l0_copies),
                     "L0B": ("l0", t.l0_copies), "L0C": ("l0c", t.l0c_copies)}.get(
                         scope, ("", 0))
    decided = [_decided(plan, w, d) for d in uses]
    cause = ", ".join(decided[:-1]) + " and " + decided[-1] if len(decided) > 1 else decided[0]
    if copies > 1:
        cause = f"{', '.join(decided)} and {copies} copies ({_copies(w, level, copies, ', ')})"
    if scope == "BT":
        axis, f = w.split("n")
        g = plan.n_granule()
        most = max(g, bt // g * g)
        return cause, (f"a factor <= {most} in .split('{w.stage}', '{axis}', {f})" if f else
                       f"splitting '{axis}' (.split('{w.stage}', '{axis}', {most}))")
    order = {"L1": ("k", "m", "n"), "L0A": ("k0", "m"), "L0B": ("k0", "n")}.get(scope, uses)
    fix = _smaller(plan, w, order)
    if copies > 1:
        fix += f", or {_copies(w, level, 1)}"
    return cause, fix


def _granule(plan: CubePlan, d: str) -> int:
    return {"m": plan.m_granule, "n": plan.n_granule}.get(d, plan.k_granule)()


def _value(plan: CubePlan, d: str) -> int:
    t = plan.tiling
    return {"m": t.tm, "n": t.tn, "k": t.tk, "k0": t.k0}[d]


def _decided(plan: CubePlan, w: Written, d: str) -> str:
    """The record that decided tile size ``d`` (or that none split its axis)."""
    axis, f = w.split(d)
    if f is not None:
        return f".split('{w.stage}', '{axis}', {f})"
    return f"'{axis}' not split ({_WHAT[d]} = {_value(plan, d)})"


def _smaller(plan: CubePlan, w: Written, ds: tuple[str, ...]) -> str:
    """Ways to make tile sizes ``ds`` smaller: a smaller factor of a split given, a split of
    an axis not split (half the size, in whole granules; then tensorize its inner loop when it
    is a K loop)."""
    given, new = [], []
    for d in ds:
        axis, f = w.split(d)
        if f is not None:
            given.append(f".split('{w.stage}', '{axis}', {f})")
            continue
        value, g = _value(plan, d), _granule(plan, d)
        half = value // 2 // g * g
        if d == "k0":  # the L0 step divides the L1 step
            half = max((x for x in range(g, half + 1, g) if plan.tiling.tk % x == 0), default=0)
        if half >= g:
            then = ", then tensorize its inner loop" if d in ("k", "k0") else ""
            new.append(f"splitting '{axis}' (.split('{w.stage}', '{axis}', {half}){then})")
    ways = [f"a smaller factor in {given[0]}"
            + (f" (or in {', '.join(given[1:])})" if given[1:] else "")] if given else []
    return " or ".join(ways + new) or "a smaller tile"


def _copies(w: Written, level: str, n: int, join: str = " and ") -> str:
    """The records giving ``level`` ``n`` copies."""
    if level == "l0c":
        return f".cache_write('{w.stage}', 'L0C', copies={n})"
    at_loop = w.l1_at if level == "l1" else w.l0_at
    at = f", at=('{w.stage}', '{at_loop}')" if at_loop else ""
    sa, sb = ("L1", "L1") if level == "l1" else ("L0A", "L0B")
    return (f".cache_read('{w.a}', '{sa}'{at}, copies={n}){join}"
            f".cache_read('{w.b}', '{sb}'{at}, copies={n})")


def _places(w: Written, args: str) -> str:
    return " and ".join(f".place('{s}', 'vector'{args})" for s in w.placed)
