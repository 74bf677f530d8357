"""Several outputs per kernel: the root output's tiles must partition every other output.

The schedule splits the loops of the root output (``Schedule.root``); every other output is
computed in the root's tile, over the box bounds inference asks of it, and stored to GM from
there. Each of its elements must then be stored by exactly one tile: along every axis the
schedule splits, the output's box must follow the tile (start = the tile's start, extent =
the factor); its other axes must be whole. ``q[i, j] = x[i, j] / s[i]`` with ``s`` an output,
split along ``i``: ``s``'s box is the tile's rows, so each tile stores its rows of ``s``. Split
along ``j`` too, every ``j`` tile of a row would store the same ``s[i]`` (a write race across
cores), so that schedule is refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ascendsched.errors import ScheduleError
from ascendsched.lower.affine import Affine
from ascendsched.lower.bounds import Axis

if TYPE_CHECKING:
    from ascendsched.lower.build_loop_nest import _Builder


def check_output_tiles(b: _Builder) -> None:
    """Raise ScheduleError unless the root's tiles partition every other output."""
    if not b.extra:
        return
    split = [a for a in b.out_axes if b.nest.factors[a] != b.sizes[a]]
    probe = {a: Affine.of("@" + a) for a in split}
    boxes = b._bounds(tuple(Axis(a, probe.get(a, Affine()), b.nest.factors[a])
                            for a in b.out_axes))
    root = b.out.name
    for o in b.extra:
        used: list[str] = []
        for k, ax in enumerate(boxes[o.name]):
            if ax.start == Affine() and ax.extent == o.shape[k]:
                continue  # whole axis
            match = [a for a in split if ax.start == probe[a] and ax.extent == b.nest.factors[a]
                     and a not in used]
            if not match:
                raise ScheduleError(
                    f"output '{o.name}' axis {k}: the tiles of '{root}' compute a part of it "
                    f"that is not theirs alone (it starts at {ax.start}, {ax.extent} long), so "
                    f"several tiles would store the same elements; read '{o.name}' in '{root}' "
                    f"at the tile's own indices (e.g. {o.name}[i]), or compute it in its own "
                    f"algorithm")
            used.append(match[0])
        for a in split:
            if a not in used:
                follows = ", ".join(used) or "no split axis"
                raise ScheduleError(
                    f"output '{o.name}' does not vary along '{a}', which the schedule of "
                    f"'{root}' splits (factor {b.nest.factors[a]}): every tile along '{a}' "
                    f"would store the same '{o.name}' elements. Split only the axes "
                    f"'{o.name}' follows ({follows}), or compute '{o.name}' in its own "
                    f"algorithm")
