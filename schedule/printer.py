"""A schedule prints as the Python calls that rebuild it (paste into a regression test)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ascendsched.schedule.schedule import Schedule


def format_schedule(s: Schedule) -> str:
    from ascendsched.schedule import cube_directives as c
    from ascendsched.schedule import online as o
    from ascendsched.schedule import schedule as d

    lines = [f"Schedule({s.algo.name})"]
    for x in s.directives:
        if isinstance(x, d.Split):
            lines.append(f"  .split({x.stage!r}, {x.axis!r}, {x.factor}, outer={x.outer!r}, "
                         f"inner={x.inner!r})")
        elif isinstance(x, d.Reorder):
            lines.append(f"  .reorder({x.stage!r}, {', '.join(map(repr, x.order))})")
        elif isinstance(x, d.Fuse):
            lines.append(f"  .fuse({x.stage!r}, {x.outer!r}, {x.inner!r}, fused={x.fused!r})")
        elif isinstance(x, d.Bind):
            lines.append(f"  .bind({x.stage!r}, {x.loop!r}, cores={x.cores})")
        elif isinstance(x, d.ComputeAt):
            lines.append(f"  .compute_at({x.stage!r}, {x.consumer!r}, {x.loop!r})")
        elif isinstance(x, d.ComputeInline):
            lines.append(f"  .compute_inline({x.stage!r})")
        elif isinstance(x, d.Buffering):
            lines.append(f"  .buffer({x.tensor!r}, copies={x.copies})")
        elif isinstance(x, d.LoadOnce):
            lines.append(f"  .load_once({x.tensor!r}" + (")" if x.hoist else ", hoist=False)"))
        elif isinstance(x, d.LoadAt):
            lines.append(f"  .cache_read({x.tensor!r}, 'UB', at=({x.stage!r}, {x.loop!r}), "
                         f"copies={x.copies})")
        elif isinstance(x, o.Online):
            lines.append(f"  .online({x.stage!r}, {x.max_stage!r})")
        elif isinstance(x, c.Tensorize):
            lines.append(f"  .tensorize({x.stage!r}, {x.loop!r}, {x.intrinsic!r})")
        elif isinstance(x, c.Place):
            rows = f", rows={x.rows}" if x.rows is not None else ""
            vc = f", vector_cores={x.vector_cores}" if x.vector_cores != 2 else ""
            lines.append(f"  .place({x.stage!r}, {x.unit!r}{rows}{vc})")
        elif isinstance(x, c.CacheRead):
            at = f", at=({x.at_stage!r}, {x.at_loop!r})" if x.at_loop is not None else ""
            lines.append(f"  .cache_read({x.tensor!r}, {x.scope!r}{at}, copies={x.copies})")
        elif isinstance(x, c.CacheWrite):
            lines.append(f"  .cache_write({x.stage!r}, {x.scope!r}, copies={x.copies})")
        elif isinstance(x, c.TileSwizzle):
            lines.append(f"  .swizzle({x.stage!r}, {x.loop!r}, {x.width}, {x.axis!r})")
    return "\n".join(lines)


def print_loop_nest(s: Schedule) -> str:
    """Pseudocode of the output stage's loops before lowering (Halide's print_loop_nest): under
    each tile loop the inputs staged there and the stages computed once per iteration of it
    (``compute_at`` an outer loop), the rest per tile."""
    out = s.root()
    nest = s.loop_nest(out.name)
    names = [n for n, _ in nest.loops]
    lines, pad = [], ""

    def level(st_name: str) -> str | None:  # the outer loop a stage is computed at, if any
        p = s.placement(st_name)
        loop = getattr(p, "loop", None)
        return loop if loop in names[:-1] else None

    for name, axes in nest.loops:
        bound = f"  # on {nest.bound[1]} cores" if nest.bound and nest.bound[0] == name else ""
        lines.append(f"{pad}for {name} (tiles of {', '.join(axes)}):{bound}")
        pad += "  "
        for t in s.algo.inputs:
            at = s.loaded_at(t.name)
            if at is not None and at.loop == name:
                lines.append(f"{pad}load {t.name} box of this {name} (UB, {at.copies} "
                             f"cop{'ies' if at.copies > 1 else 'y'}): its tiles read parts")
        lines += [f"{pad}compute {st.name} (UB, once per {name})" for st in s.algo.stages
                  if st is not out and st not in s.algo.outputs and level(st.name) == name]
    for st in s.algo.stages:
        p = s.placement(st.name)
        if st is out or level(st.name) is not None:
            continue
        if st in s.algo.outputs:
            lines.append(f"{pad}compute {st.name} tile (UB) -> GM")
            continue
        if p is not None and type(p).__name__ == "ComputeInline":
            continue
        lines.append(f"{pad}compute {st.name} tile (UB)")
    tile = " x ".join(str(nest.factors[a.name]) for a in out.op.axes)  # type: ignore[union-attr]
    lines.append(f"{pad}compute {out.name} tile [{tile}] (UB) -> GM")
    return "\n".join(lines)
