"""Flags as ``insert_sync`` places them, read off the program text: a flag's sets and waits
(``Flag``), whether they form one of its two patterns (``standard_pattern``, ``body_pairs``),
which event ids they take, whether channels sharing ids keep apart in the text (``_apart``),
and the loops that may carry a (wait, next set) pair of one flag (``flag_pair_levels``).
Used by both halves of the happens-before oracle (``sync_text.py``, ``sync_chains.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ascendsched.lower.affine import Affine
from ascendsched.lower.instances import InstrInfo
from ascendsched.lower.sync_ir import EventSync, SetFlag, Sync, SyncRole, WaitFlag
from ascendsched.target.model import CoreType, Pipe


@dataclass(frozen=True, eq=False)
class Flag:
    """The set and wait statements of one flag (a channel, or a HardEvent)."""

    key: tuple
    core: CoreType
    src: Pipe
    dst: Pipe
    sets: tuple[InstrInfo, ...]
    waits: tuple[InstrInfo, ...]
    channel: object  # the syncs' channel (None: several or none)

    @property
    def name(self) -> str:
        return f"{self.src}->{self.dst}" + (f" (channel {self.channel})"
                                            if self.channel is not None else "")


def standard_pattern(f: Flag) -> bool:
    """Whether ``f`` is one of the two patterns ``insert_sync`` places, which alternate by
    construction: a set before its wait in one body (same id), or the carried pattern (wait
    before set in one body, or in each of several disjoint bodies, ``body_pairs``, inside a
    child of one body, or inside sibling children of it (loops, guards around loops), with one
    prologue set before the first and one epilogue wait after the last per id the bodies' ids
    can take)."""
    mains = [i for i in f.sets + f.waits if _role(i) in (SyncRole.SET, SyncRole.WAIT)]
    pro = sorted((i for i in f.sets if _role(i) == SyncRole.PROLOGUE), key=lambda i: i.path)
    epi = sorted((i for i in f.waits if _role(i) == SyncRole.EPILOGUE), key=lambda i: i.path)
    if len(pro) + len(epi) + len(mains) != len(f.sets) + len(f.waits):
        return False
    if len(mains) == 2 and not pro and not epi:  # a set, then its wait, in one body
        st = next((i for i in mains if isinstance(i.instr, SetFlag)), None)
        wt = next((i for i in mains if isinstance(i.instr, WaitFlag)), None)
        return st is not None and wt is not None and st.path[:-1] == wt.path[:-1] and \
            _eid(st) == _eid(wt) and st.path[-1] < wt.path[-1]
    pairs = body_pairs(f)
    if pairs is None or not pro:
        return False
    pro_ids = [_const_id(i) for i in pro]
    epi_ids = [_const_id(i) for i in epi]
    if None in pro_ids or None in epi_ids or len(set(pro_ids)) != len(pro) or \
            sorted(pro_ids) != sorted(epi_ids):  # type: ignore[type-var]
        return False  # one prologue set per id, waited by one epilogue wait
    values = _id_values([x for x, _ in pairs])
    if values is None or not values <= set(pro_ids):
        return False
    # the prologue sets in the body holding an enclosing loop of every pair, before it; the
    # epilogue waits after it (in any one run of that body: P_v, then the loop's W/S pairs,
    # run by run of the bodies, which never interleave, E_v)
    parent = pro[0].path[:-1]
    if not all(i.path[:-1] == parent for i in pro + epi):
        return False
    d = len(parent)
    if not all(len(x.path) > d + 1 and x.path[:d] == parent for x, _ in pairs):
        return False  # each pair inside a child of that body (a loop, or Ifs around one)
    first = min(x.path[d] for x, _ in pairs)
    last = max(x.path[d] for x, _ in pairs)
    return all(i.path[-1] < first for i in pro) and all(i.path[-1] > last for i in epi)


def body_pairs(f: Flag) -> list[tuple[InstrInfo, InstrInfo]] | None:
    """The (set, wait) of each body holding a carried pair of ``f``: per body one wait before
    one set with one id, the bodies disjoint (their runs never interleave); None when ``f``'s
    main sets and waits are not such."""
    sets = [x for x in f.sets if _role(x) == SyncRole.SET]
    waits = [y for y in f.waits if _role(y) == SyncRole.WAIT]
    if len(sets) != len(waits) or not sets:
        return None
    by_body = {y.path[:-1]: y for y in waits}
    pairs = []
    for x in sets:
        y = by_body.get(x.path[:-1])
        if y is None or y.path[-1] > x.path[-1] or _eid(x) != _eid(y):
            return None
        pairs.append((x, y))
    if len(by_body) != len(pairs):
        return None
    bodies = list(by_body)
    if not all(disjoint_bodies(a, b) for n, a in enumerate(bodies) for b in bodies[n + 1:]):
        return None  # nested bodies: their runs may interleave
    return pairs


def disjoint_bodies(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """Whether the bodies at paths ``a`` and ``b`` are disjoint subtrees (neither holds the
    other): their runs never interleave."""
    n = min(len(a), len(b))
    return a[:n] != b[:n]


def _apart(groups: list[list[InstrInfo]]) -> bool:
    """Whether channels that may use a common event id lie in disjoint stretches of the program
    text (channels whose ids never meet cannot disturb each other's alternation)."""
    spans = [(min(i.id for i in g), max(i.id for i in g)) for g in groups]
    values = [_id_values(g) for g in groups]
    for x in range(len(groups)):
        for y in range(x + 1, len(groups)):
            vx, vy = values[x], values[y]
            if (vx is None or vy is None or vx & vy) and \
                    not (spans[x][1] < spans[y][0] or spans[y][1] < spans[x][0]):
                return False
    return True


def _id_values(group: list[InstrInfo]) -> frozenset[int] | None:
    """The event ids the syncs of ``group`` can take (None: not known without isl): constants,
    and ``base + var % m``."""
    out: set[int] = set()
    for i in group:
        eid = _eid(i)
        if eid is None:
            return None
        mod = _mod_id(eid)
        if eid.is_const:
            out.add(eid.const)
        elif mod is not None:
            out.update(eid.const + v for v in range(mod[1]))
        else:
            return None
    return frozenset(out)


def _mod_id(eid: Affine) -> tuple[str, int] | None:
    """``(var, m)`` for an event id ``base + var % m`` (a ping-pong id), else None."""
    if eid.terms or eid.divs or len(eid.mods) != 1 or eid.mods[0][2] != 1:
        return None
    return eid.mods[0][0], eid.mods[0][1]


def _main_pair(f: Flag) -> tuple[InstrInfo, InstrInfo] | None:
    """The one main set and main wait of a placed flag, in one body with one id, else None."""
    sets = [x for x in f.sets if _role(x) == SyncRole.SET]
    waits = [y for y in f.waits if _role(y) == SyncRole.WAIT]
    if len(sets) != 1 or len(waits) != 1:
        return None
    x, y = sets[0], waits[0]
    eid = _eid(x)
    if x.path[:-1] != y.path[:-1] or eid is None or eid != _eid(y):
        return None
    return x, y


def _const_id(i: InstrInfo) -> int | None:
    eid = _eid(i)
    return eid.const if eid is not None and eid.is_const else None


def _eid(i: InstrInfo) -> Affine | None:
    """The event id of a set or wait statement (None: another statement)."""
    return i.instr.event_id if isinstance(i.instr, EventSync) else None


def _role(i: InstrInfo) -> SyncRole | None:
    """The role of a sync statement in its placement (None: none, or not a sync)."""
    return i.instr.role if isinstance(i.instr, Sync) else None


def _shared(a: tuple, b: tuple) -> int:
    """Length of the common prefix of two paths (or of two tuples of loop paths)."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def flag_pair_levels(w: InstrInfo, s: InstrInfo, ids: tuple[Affine, Affine] | None = None
                     ) -> tuple[tuple[tuple[str, int], ...], bool]:
    """For a (wait, later set) pair of one flag with equal ids (a double-set item): the common
    loops that may carry its instance pairs, each with a lower bound on their distance, and
    whether pairs in one iteration of every common loop may exist, from the text alone (an
    over-approximation: more to order, never less). Both ids ``base + var % m`` (one ``var``
    and ``m``): equal ids at a distance in ``var`` of at least ``m``. ``ids``: the two ids to
    use instead of the statements' own (a wait and a set of two channels given one id)."""
    common = _shared(w.loop_paths, s.loop_paths)
    ew, es = ids if ids is not None else (_eid(w) or Affine(), _eid(s) or Affine())
    period = _mod_id(ew) if ew == es else None
    levels = tuple((v, period[1] if period and period[0] == v else 1)
                   for v in w.loop_vars[:common])
    return levels, w.id < s.id
