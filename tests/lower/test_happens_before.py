"""The symbolic happens-before oracle (lower/happens_before.py): flag misuse, chains, and a cost
that does not grow with the problem size."""

from __future__ import annotations

from dataclasses import replace

import islpy as isl
import pytest

from ascendsched.algo import library as L
from ascendsched.lower.byte_access import shared_copy
from ascendsched.lower.flag_patterns import body_pairs, flag_pair_levels, standard_pattern
from ascendsched.lower.happens_before import SyncOracle, unordered_dependences
from ascendsched.lower.insert_sync import insert_sync, place_syncs
from ascendsched.lower.instances import InstrInfo
from ascendsched.lower.ir import For
from ascendsched.lower.pipeline import lower
from ascendsched.lower.polyhedral import analyze_dependences
from ascendsched.lower.remove_redundant_sync import remove_redundant_sync
from ascendsched.lower.schedule_for import schedule_for
from ascendsched.lower.sync_chains import union_of
from ascendsched.lower.sync_ir import SyncRole
from ascendsched.schedule import Schedule
from ascendsched.schedule.gemm import GemmSchedule
from ascendsched.target import ASCEND_910B, Pipe
from tests.kit.cube import CASES, gemm_kernel
from tests.kit.ir import planned, set_flag, vadd_kernel, wait_flag


def _placed(k):  # noqa: ANN001, ANN202
    p = planned(k)
    deps = analyze_dependences(p)
    return place_syncs(p, deps, ASCEND_910B).kernel, deps


@pytest.mark.parametrize("make", [
    lambda: vadd_kernel(copies=2),
    lambda: vadd_kernel(n=2048 * 6, tile=2048, copies=2, blocks=2),
    lambda: lower(GemmSchedule(L.gemm(300, 200, 520)).tile(64, 64, 128).split_k(32)
                  .buffer("l1", 2).buffer("l0", 2).buffer("l0c", 2).bind(3), stop_after="apply memory plan"),
    lambda: lower(Schedule(L.softmax(13, 256)).split("y", "i", 3).bind("y", "i_o", 2)
                  .compute_at("mx", "y", "i_o").compute_at("e", "y", "i_o")
                  .compute_at("s", "y", "i_o").compute_inline("xf")
                  .buffer("x").buffer("y"), stop_after="apply memory plan"),
], ids=["vadd db", "vadd db 2 blocks", "gemm edges 3 cores", "softmax tails db"])
def test_placed_patterns_alternate_by_isl_too(make) -> None:  # noqa: ANN001
    # the structural shortcut (insert_sync's two patterns alternate by construction) agrees
    # with the isl check on every placed flag
    placed, deps = _placed(make())
    oracle = SyncOracle(placed, deps, ASCEND_910B)
    standard = [f for f in oracle.flags.values() if standard_pattern(f)]
    assert standard
    for f in standard:
        assert oracle.alternation_by_isl(f) == [], f.name
    assert oracle.problems() == ()


def _layernorm_rows() -> Schedule:
    s = Schedule(L.layernorm(100, 512)).split("y", "i", 8).bind("y", "i_o", 3)
    for st in ("xf", "mean", "d", "var", "r"):
        s = s.compute_at(st, "y", "i_o")
    return s.buffer("x", 2).buffer("y", 2)


def _gemm_tails_2_cores() -> GemmSchedule:
    return (GemmSchedule(L.gemm(200, 130, 232)).tile(64, 64, 128).split_k(32).buffer("l1", 2)
            .buffer("l0", 2).bind(2))


_TEXT_CASES = {
    "vadd db 2 blocks": lambda: planned(vadd_kernel(n=2048 * 6, tile=2048, copies=2, blocks=2)),
    "vadd persistent tail": lambda: lower(schedule_for(L.vadd(4194304)), stop_after="apply memory plan"),
    "mul_add_relu prefix guard": lambda: lower(schedule_for(L.fused_mul_add_relu(4194304)),
                                               stop_after="apply memory plan"),
    "gemm edges 3 cores": lambda: lower(
        GemmSchedule(L.gemm(300, 200, 520)).tile(64, 64, 128).split_k(32).buffer("l1", 2)
        .buffer("l0", 2).buffer("l0c", 2).bind(3), stop_after="apply memory plan"),
    "gemm trans l0 db": lambda: planned(gemm_kernel(CASES["fp16_trans"])),
    "layernorm rows db tails": lambda: lower(_layernorm_rows(), stop_after="apply memory plan"),
    "gemm default tails in m n k": lambda: lower(schedule_for(L.gemm(1000, 1000, 1000)),
                                                 stop_after="apply memory plan"),
    # tile classes as persistent loops, two L0 K loops per tile: shared slot-free channels
    "gemm tails 2 cores": lambda: lower(_gemm_tails_2_cores(), stop_after="apply memory plan"),
    # a flag whose set comes before the point where a chain reached its pipe fills nothing
    "mul_add_relu db tail": lambda: lower(
        Schedule(L.fused_mul_add_relu(5000)).split("d", "i", 1024).buffer("a").buffer("b")
        .buffer("c").buffer("d"), stop_after="apply memory plan"),
}


@pytest.mark.parametrize("name", sorted(_TEXT_CASES))
@pytest.mark.parametrize("stage", ["placed", "pruned"])
def test_what_the_text_settles_isl_confirms(name: str, stage: str) -> None:
    # every group the program text settles (sync_text.py: pairs beside source or sink, carried
    # patterns within their period, double-set items) is also covered by isl using only the
    # syncs the text named: the shortcuts never claim an order isl cannot prove
    planned = _TEXT_CASES[name]()
    deps = analyze_dependences(planned)
    placed = place_syncs(planned, deps, ASCEND_910B)
    k = placed.kernel if stage == "placed" else remove_redundant_sync(
        placed.kernel, deps, ASCEND_910B, settled_by=placed.settled_by,
        oracle=placed.oracle).kernel
    oracle = SyncOracle(k, deps, ASCEND_910B)
    every = frozenset(oracle.flags) | frozenset(key for key, _ in oracle.barriers)
    groups: dict[tuple[int, int], list] = {}
    for it in oracle.items:
        groups.setdefault((it.src.id, it.dst.id), []).append(it)
    settled = 0
    for (sid, tid), items in groups.items():
        s, t = oracle.infos[sid], oracle.infos[tid]
        used = oracle._without_isl(s, t, items, frozenset())
        if used is None:
            continue
        settled += 1
        rest, _ = oracle._cover(union_of([it.relation for it in items]), s, t, every - used,
                                frozenset())
        assert rest.is_empty(), f"S{sid} -> S{tid}: {[str(it.dep) for it in items]} by {used}"
    assert settled >= len(groups) // 3, (settled, len(groups))


def carried_pairs(f):  # noqa: ANN001, ANN201
    """``body_pairs`` of a carried channel shared by several disjoint bodies
    (``insert_sync.channel_numbers``); None when ``f`` is not one."""
    pairs = body_pairs(f)
    return pairs if pairs is not None and len(pairs) > 1 else None


def test_a_carried_channel_shared_by_sibling_bodies_alternates_by_isl_too() -> None:
    # each tile class's two L0 K loops (full L1 step, peeled K tail) share one M -> MTE1
    # channel over the class loop, and the class loops (sibling loops of the kernel body)
    # share it too (insert_sync.channel_numbers): several wait/set pairs in disjoint bodies
    # between one prologue before the first loop and one epilogue after the last. The text
    # calls it standard (flag_patterns.standard_pattern); isl agrees that it alternates, and the
    # placement orders every dependence
    placed, deps = _placed(lower(_gemm_tails_2_cores(), stop_after="apply memory plan"))
    oracle = SyncOracle(placed, deps, ASCEND_910B)
    shared = [f for f in oracle.flags.values() if carried_pairs(f) is not None]
    assert len(shared) >= 2 and all(standard_pattern(f) for f in shared)

    def children(f) -> set:  # noqa: ANN001 -- the sibling children holding f's pairs
        parent = next(x for x in f.sets if x.instr.role == SyncRole.PROLOGUE).path[:-1]
        return {x.path[len(parent)] for x, _ in carried_pairs(f)}  # type: ignore[union-attr]
    assert any(len(children(f)) >= 3 for f in shared)  # one channel for three class loops
    for f in shared:
        assert oracle.alternation_by_isl(f) == [], f.name
        # nested bodies (one wait inside the other's body) would not alternate: not standard
        x, y = carried_pairs(f)[0]  # type: ignore[index]
        inner = replace(y, path=x.path[:-1] + (0, 0))
        assert not standard_pattern(replace(f, waits=tuple(
            inner if w is y else w for w in f.waits)))
    assert oracle.problems() == ()


def test_a_shared_carried_channel_orders_pairs_across_its_bodies() -> None:
    # a dependence from one L0 K loop to the other (the tail's Mmad, the next tile's first
    # load of that slot) is ordered by the shared channel: the wait before the load meets the
    # last set of its id in any of the bodies, which is the source's or later
    # (sync_text_carried._hoisted_cover over body_pairs); isl agrees on every one
    def hoisted(o, it, v, d):  # noqa: ANN001, ANN202
        k = o._hoisted_cover(it.src, it.dst, v, o._same_copy(it.src, it.dst, [it]), frozenset())
        return [] if k is None else [k]

    across = 0
    for o, it, _, _, keys in _checked_carried("gemm tails 2 cores", hoisted):
        shared = [o.flags[k] for k in keys if k in o.flags
                  and carried_pairs(o.flags[k]) is not None]
        across += bool(shared) and it.src.path[:2] != it.dst.path[:2]
    assert across >= 4, across


def _checked_carried(name: str, candidates):  # noqa: ANN001, ANN202
    """For every item of ``_TEXT_CASES[name]`` placed and every loop that may carry it, the
    key sets ``candidates(oracle, item, var, distance)`` names, each first checked by isl (the
    pairs that loop carries are covered by those syncs alone): (oracle, item, var, distance,
    keys)."""
    planned = _TEXT_CASES[name]()
    deps = analyze_dependences(planned)
    oracle = SyncOracle(place_syncs(planned, deps, ASCEND_910B).kernel, deps, ASCEND_910B)
    every = frozenset(oracle.flags) | frozenset(key for key, _ in oracle.barriers)
    for it in oracle.items:
        s, t = it.src, it.dst
        levels = it.dep.carried if it.dep is not None else flag_pair_levels(s, t)[0]
        for var, distance in levels:
            for keys in candidates(oracle, it, var, distance):
                j = [f.var for f in s.loops].index(var)
                rest, _ = oracle._cover(_carried_at(it.relation, s, t, j), s, t, every - keys,
                                        frozenset())
                assert rest.is_empty(), (str(it.dep or it.key), var, keys)
                yield oracle, it, var, distance, keys


def _others_fail(oracle, it, var: str, distance: int) -> bool:  # noqa: ANN001
    """Whether the rules before the drain and hoisted ones leave the carried pairs open."""
    none = frozenset()
    return oracle._carried_cover(it.src, it.dst, var, none) is None and \
        oracle._carried_flag_cover(it.src, it.dst, var, distance, none) is None


def test_a_reused_double_buffer_slot_is_settled_by_the_text() -> None:
    # load_l0a writes a_l0[copy kk % 2] again two kk iterations later (same-pipe WAW, distance
    # 2): nothing orders it directly; the in-body MTE1 -> M pair (load, then mmad) relays it to
    # the carried M -> MTE1 pattern (mmad done, next load of that slot). The text proves it
    # (relayed: sync_text_carried._carried_flags for a channel of one body, _hoisted for one
    # shared by the tile classes' bodies), and isl agrees on every candidate
    def relayed(o, it, v, d):  # noqa: ANN001, ANN202
        if it.src.pipe != it.dst.pipe:
            return []
        one = [keys for keys, period in o._carried_flags(it.src, it.dst, v) if period <= d]
        shared = [keys for keys, _ in o._hoisted(it.src, it.dst, v)]
        return [keys for keys in one + shared if len(keys) == 2]
    assert len(list(_checked_carried("gemm default tails in m n k", relayed))) >= 10


@pytest.mark.parametrize("name", ["mul_add_relu db tail", "gemm trans l0 db"])
def test_a_drain_inside_the_carrying_loop_orders_what_it_carries(name: str) -> None:
    # a chain that makes the sink's pipe wait for the source's work inside the loop's body
    # (an in-body pair, or a deeper carried pattern at its last epilogue wait) completes in the
    # source's iteration: every pair that loop carries is ordered. Pairs only this rule settles
    # exist, and isl agrees on each
    got = list(_checked_carried(name, lambda o, it, v, d: [
        k for k in [o._carried_drain_cover(it.src, it.dst, v, frozenset())] if k is not None]))
    assert sum(_others_fail(o, it, v, d) for o, it, v, d, _ in got) >= 1


@pytest.mark.parametrize("name", ["gemm edges 3 cores", "gemm default tails in m n k"])
def test_a_pattern_hoisted_out_of_the_carrying_loop_orders_pairs_on_one_copy(name: str) -> None:
    # the L0A slot-free pattern (M -> MTE1, ids kk % 2) has its prologue and epilogue outside
    # the kt loop: a pair carried by kt on the same copy kk % 2 of a_l0 meets the set of the
    # last kk run with that id, which is the source's or later (sync_text._hoisted_cover).
    # Dependences and double-set items only this rule settles exist, and isl agrees on each
    def hoisted(o, it, v, d):  # noqa: ANN001, ANN202
        k = o._hoisted_cover(it.src, it.dst, v, o._same_copy(it.src, it.dst, [it]), frozenset())
        return [] if k is None else [k]

    only = {True: 0, False: 0}
    for o, it, v, d, _ in _checked_carried(name, hoisted):
        only[it.dep is not None] += _others_fail(o, it, v, d) and \
            o._carried_drain_cover(it.src, it.dst, v, frozenset()) is None
    assert only[True] >= 4 and only[False] >= 4, only


def test_a_shared_copy_needs_copies_that_do_not_overlap() -> None:
    # conflicting instances of a double-buffered tile touch the same copy only if the copies
    # occupy disjoint bytes; planned onto overlapping bytes, nothing is claimed
    p = planned(vadd_kernel(n=2048 * 6, tile=2048, copies=2, blocks=2))
    deps = analyze_dependences(p)
    d = next(d for d in deps if any("copy" in n for n in d.src_tensors + d.dst_tensors))
    sides = ((deps.info(d.src).instr, d.src_tensors), (deps.info(d.dst).instr, d.dst_tensors))
    var, m = shared_copy(p, d.space, sides)
    assert m == 2
    name = next(n for n in d.src_tensors + d.dst_tensors if "copy" in n).split("[")[0]
    buf = p.buffer_map[name]
    squeezed = replace(p, buffers=tuple(replace(b, offsets=(b.offsets[0], b.offsets[0] + 32))
                                        if b.name == name else b for b in p.buffers))
    assert buf.offsets[1] - buf.offsets[0] >= 64 and shared_copy(squeezed, d.space, sides) is None


def _carried_at(rel: isl.Map, s: InstrInfo, t: InstrInfo, j: int) -> isl.Map:
    """The pairs of ``rel`` carried by common loop ``j``: outer loops equal, loop j later."""
    a = ["b"] + [f"a{i}" for i in range(len(s.loops))]
    b = ["b2"] + [f"c{i}" for i in range(len(t.loops))]
    cons = ["b = b2"] + [f"a{i} = c{i}" for i in range(j)] + [f"a{j} < c{j}"]
    return rel.intersect(isl.Map(f"{{ {s.name}[{', '.join(a)}] -> {t.name}[{', '.join(b)}] : "
                                 f"{' and '.join(cons)} }}"))


def test_two_sets_without_a_wait_are_reported() -> None:
    k = vadd_kernel()
    body = k.programs[0].body[0].body
    bad = k.replace_body(k.programs[0].core, (For("k", 4, (
        body[0], set_flag(Pipe.MTE2, Pipe.V), body[1],
        set_flag(Pipe.MTE2, Pipe.V), wait_flag(Pipe.MTE2, Pipe.V)) + body[2:]),))
    problems = unordered_dependences(bad, None, ASCEND_910B, by_channel=False)
    assert any("two sets with no wait" in p.message for p in problems)


def test_a_pair_in_a_loop_without_the_reverse_flag_is_a_double_set() -> None:
    # MTE2 may run a tile ahead of V: its next set fires before V's wait consumed the flag
    k = vadd_kernel()
    body = k.programs[0].body[0].body
    racy = k.replace_body(k.programs[0].core, (For("k", 4, (
        body[0], body[1], set_flag(Pipe.MTE2, Pipe.V),
        wait_flag(Pipe.MTE2, Pipe.V), body[2]) + body[3:]),))
    problems = unordered_dependences(racy, None, ASCEND_910B, by_channel=False)
    assert any(p.double_set for p in problems)


def test_a_wait_with_no_set_is_a_deadlock() -> None:
    k = vadd_kernel()
    body = k.programs[0].body[0].body
    stuck = k.replace_body(k.programs[0].core, (For("k", 4, (
        wait_flag(Pipe.MTE2, Pipe.V),) + body),))
    problems = unordered_dependences(stuck, None, ASCEND_910B, by_channel=False)
    assert any("deadlock" in p.message for p in problems)


def test_an_unsynced_load_and_add_are_unordered() -> None:
    p = planned(vadd_kernel())
    deps = analyze_dependences(p)
    problems = unordered_dependences(p, deps, ASCEND_910B)
    assert any(pr.dep is not None and pr.dep.src_pipe == Pipe.MTE2 for pr in problems)


def _gemm(size: int) -> GemmSchedule:
    # 1024 and 4096 tiles on 24 cores: 16 left over in both, so the same tail guard, the same
    # parities of the K loops, the same IR up to bounds and offsets
    return (GemmSchedule(L.gemm(size, size, size)).tile(128, 128, 256)
            .split_k(64).buffer("l1", 2).buffer("l0", 2).buffer("l0c", 2).bind(24)
            .swizzle(4, "m"))


def test_oracle_work_does_not_grow_with_the_problem() -> None:
    # the symbolic analysis builds the same relations for a GEMM 4096^3 and 8192^3 of one
    # schedule: no instance, tile or core is enumerated
    work = []
    for size in (4096, 8192):
        p = lower(_gemm(size), stop_after="apply memory plan")
        deps = analyze_dependences(p)
        placed = place_syncs(p, deps, ASCEND_910B).kernel
        oracle = SyncOracle(placed, deps, ASCEND_910B)
        assert oracle.problems() == ()
        work.append((len(deps), len(oracle.infos), sorted(k[0] for k in oracle._cache)))
    assert work[0] == work[1]


def test_sibling_tile_classes_are_settled_by_the_text() -> None:
    # each tile class (full tiles, M/N edges, the K tail) is its own loop nest, a sibling
    # branch of the others; once pruning dropped the pairs placed between the branches, the
    # pairs between them are ordered by the flags that drain a branch
    # (epilogue waits) or fill the next (prologue sets, first waits): the text proves it all,
    # so no cross-branch group reaches isl (the cost of 5 tile classes was 350 isl covers)
    planned = _TEXT_CASES["gemm default tails in m n k"]()
    deps = analyze_dependences(planned)
    placed = place_syncs(planned, deps, ASCEND_910B)
    k = remove_redundant_sync(placed.kernel, deps, ASCEND_910B, settled_by=placed.settled_by,
                              oracle=placed.oracle).kernel
    oracle = SyncOracle(k, deps, ASCEND_910B)
    groups: dict[tuple[int, int], list] = {}
    for it in oracle.items:
        if it.src.path[0] != it.dst.path[0]:
            groups.setdefault((it.src.id, it.dst.id), []).append(it)
    assert len({(it.src.path[0], it.dst.path[0]) for items in groups.values()
                for it in items}) >= 2
    left = [(sid, tid) for (sid, tid), items in groups.items()
            if oracle._without_isl(oracle.infos[sid], oracle.infos[tid], items,
                                   frozenset()) is None]
    assert not left, left


@pytest.mark.parametrize("name, least", [("gemm default tails in m n k", 100),
                                         ("layernorm rows db tails", 3)])
def test_shared_ids_the_text_settles_isl_confirms(name: str, least: int,
                                                   monkeypatch) -> None:  # noqa: ANN001
    # channels given one event id: every (wait of one, later set of the other) pair the text
    # settles (flag_pair_levels with the allocated ids, then the same rules) is covered by isl
    # with only the syncs the text named
    from ascendsched.lower.flag_patterns import _mod_id

    checked = []
    real = SyncOracle.shared_id_problem

    def both(self, waits, sets, dropped):  # noqa: ANN001, ANN202
        every = frozenset(self.flags) | frozenset(k for k, _ in self.barriers)
        for w_ins, w_id in waits:
            for s_ins, s_id in sets:
                w, s = self._by_id[w_ins.id], self._by_id[s_ins.id]
                levels, independent = flag_pair_levels(w, s, ids=(w_id, s_id))
                same = _mod_id(w_id) if w_id == s_id else None
                keys = self._text_cover(w, s, dict(levels), independent, lambda same=same: same,
                                        dropped)
                if keys is not None:
                    rel = self._po(w, s).intersect(self._id_eq(w, s, w_id, s_id))
                    rest, _ = self._cover(rel, w, s, dropped | (every - keys), frozenset())
                    assert rest.is_empty(), (str(w.instr), str(s.instr), keys)
                    checked.append(keys)
        return real(self, waits, sets, dropped)

    monkeypatch.setattr(SyncOracle, "shared_id_problem", both)
    planned = _TEXT_CASES[name]()
    insert_sync(planned, analyze_dependences(planned), ASCEND_910B)
    assert len(checked) >= least


@pytest.mark.parametrize("name", ["gemm edges 3 cores", "layernorm rows db tails"])
def test_a_probe_reports_only_pairs_the_full_cover_leaves(name: str) -> None:
    # ``_cover(probe=True)`` builds chains from one or two source instances only: with each
    # sync of a group's text cover dropped in turn, it must agree with the full cover on
    # whether pairs are left, and every pair it reports must be one the full cover leaves
    planned = _TEXT_CASES[name]()
    deps = analyze_dependences(planned)
    oracle = place_syncs(planned, deps, ASCEND_910B).oracle
    groups: dict[tuple[int, int], list] = {}
    for it in oracle.items:
        groups.setdefault((it.src.id, it.dst.id), []).append(it)
    left = ordered = 0
    for (sid, tid), items in list(groups.items())[:60]:
        s, t = oracle.infos[sid], oracle.infos[tid]
        rel = union_of([it.relation for it in items])
        for key in sorted(oracle._without_isl(s, t, items, frozenset()) or (), key=str):
            dropped = frozenset([key])
            full, _ = oracle._cover(rel, s, t, dropped, frozenset())
            probed, _ = oracle._cover(rel, s, t, dropped, frozenset(), probe=True)
            assert full.is_empty() == probed.is_empty(), (sid, tid, key)
            assert probed.is_subset(full), (sid, tid, key)
            left += not full.is_empty()
            ordered += full.is_empty()
    assert left and ordered, (left, ordered)  # both outcomes were exercised


def _groups_by_walking(oracle: SyncOracle, skip: frozenset, dropped: frozenset) -> list:
    """What ``_to_check`` must give, by walking every group (its definition)."""
    out = []
    for its, _, _, (first, gkey, _) in oracle._all_groups:
        kept = [(n, it) for n, it in its
                if not (it.key[1] in skip if it.key[0] == "dep" else it.key[1] in dropped)]
        if not kept:
            continue
        if len(kept) < len(its):
            first = kept[0][0]
            gkey = (gkey[0], gkey[1], frozenset(it.key for _, it in kept))
        used = oracle._ok.get(gkey)
        if used is None or used & dropped:
            out.append((first, gkey, used))
    return [(gkey, used) for _, gkey, used in sorted(out, key=lambda x: x[0])]


@pytest.mark.parametrize("name", ["gemm edges 3 cores", "layernorm rows db tails"])
def test_the_groups_a_trial_checks_are_those_a_walk_over_every_group_finds(name: str) -> None:
    # pruning's trials find the groups to re-check through indices (sync -> verdicts that used
    # it, dependence/flag -> groups); along a whole pruning run they must be exactly the ones
    # a walk over every group finds, in the same order
    from ascendsched.lower.remove_redundant_sync import _candidates

    planned = _TEXT_CASES[name]()
    deps = analyze_dependences(planned)
    placed = place_syncs(planned, deps, ASCEND_910B)
    oracle, settled = placed.oracle, placed.settled_by
    skip = frozenset(n for ns in settled.values() for n in ns)
    dropped: frozenset = frozenset()
    trials = kept = 0
    for ch in _candidates(placed.kernel):
        keys = oracle.sync_keys(ch)
        trial_skip = skip - settled.get(ch, frozenset())
        want = _groups_by_walking(oracle, trial_skip, dropped | keys)
        got = [(g, u) for g, _, u in oracle._to_check(trial_skip, dropped | keys)]
        assert got == want, ch
        trials += 1
        if not oracle.problems(dropped=dropped | keys, skip=trial_skip, first_only=True):
            dropped, skip = dropped | keys, trial_skip
        else:
            kept += 1
    assert trials > 5 and kept and len(dropped) > 0, (trials, kept, len(dropped))
