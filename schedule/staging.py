"""Inputs staged in UB at an outer tile loop of the Vector path: the ``LoadAt`` record that
``Schedule.cache_read(tensor, "UB", at=(stage, loop))`` makes, and its checks.

The input's box for one iteration of the loop (the box every tile and chunk inside it reads)
is loaded once into UB; each tile and chunk inside reads its part (``lower/build_loop_nest.py``
``_below``). A row whose statistics are read in chunks (``schedule/chunks.py``) is then read
from GM once instead of once per statistic and once for its pieces.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ascendsched.errors import ScheduleError

if TYPE_CHECKING:
    from ascendsched.schedule.schedule import Schedule


@dataclass(frozen=True)
class LoadAt:
    """Input ``tensor`` loaded into UB once per iteration of the output's tile loop ``loop``
    (the box every tile inside it reads), each tile and chunk inside reading its part."""

    tensor: str
    stage: str  # the output whose loop it is
    loop: str
    copies: int


def make_load_at(s: Schedule, tensor: str, at: object, copies: int) -> LoadAt:
    """The record of ``s.cache_read(tensor, "UB", at=at, copies=copies)``, checked."""
    call = f"cache_read('{tensor}', 'UB', at={at!r})"
    if not (isinstance(at, tuple) and len(at) == 2):
        raise ScheduleError(f"{call}: at=(stage, loop), e.g. at=('y', 'i_o')")
    st, loop = at
    t = next((x for x in s.algo.tensors if x.name == tensor), None)
    if t is None or not t.is_placeholder:
        raise ScheduleError(
            f"{call}: '{tensor}' is not an input of '{s.algo.name}' (its inputs: "
            f"{', '.join(x.name for x in s.algo.inputs)}); a stage's values stay in UB when "
            f"it is computed at a loop: compute_at")
    if s.loaded_once(tensor):
        raise ScheduleError(f"{call}: load_once('{tensor}') already keeps '{tensor}' whole in "
                            f"UB for the whole kernel; drop one of the two")
    s._stage(st, "cache_read")
    loops = s.loop_names(st)
    if loop not in loops[:-1]:
        where = (f"'{loop}' is its innermost tile loop, where every tile loads its box anyway "
                 f"(that is buffer('{tensor}', copies={copies}))"
                 if loops and loop == loops[-1] else f"'{loop}' is not a tile loop of it")
        raise ScheduleError(
            f"{call}: '{st}'{' has no outer tile loop' if len(loops) < 2 else ''}; {where}. "
            f"Stage it at an outer tile loop of '{st}': "
            + (", ".join(repr(n) for n in loops[:-1]) or "(none: split first)"))
    if isinstance(copies, bool) or copies not in (1, 2):
        raise ScheduleError(f"{call}: copies={copies!r}: 1 (single) or 2 (double buffering: "
                            f"the next iteration's box loads during this one)")
    return LoadAt(tensor, st, loop, copies)
