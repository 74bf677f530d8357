"""Domains, byte accesses and dependences (lower/instances.py, byte_access.py, polyhedral.py)."""

from __future__ import annotations

from dataclasses import replace

import islpy as isl
import pytest

from ascendsched.algo import library as L
from ascendsched.errors import NotAffineError
from ascendsched.lower.affine import Affine, Cond
from ascendsched.lower.byte_access import instr_accesses
from ascendsched.lower.instances import kernel_instrs
from ascendsched.lower.ir import BLOCK_IDX, For, If, Instr, Kernel, Program, view
from ascendsched.lower.pipeline import lower
from ascendsched.lower.polyhedral import DepKind, analyze_dependences
from ascendsched.lower.schedule_for import schedule_for
from ascendsched.target import CoreType, Pipe
from tests.kit.ir import row_max_sub_kernel, vadd_kernel


def _dep_table(k: Kernel) -> set[tuple[str, int, int, str, str, tuple, bool]]:
    return {(d.kind.value, d.src, d.dst, str(d.src_pipe), str(d.dst_pipe), d.carried,
             d.loop_independent) for d in analyze_dependences(k)}


def test_vadd_single_buffer_dependences() -> None:
    # S0 load x, S1 load y, S2 add, S3 store.
    deps = _dep_table(vadd_kernel())
    assert ("RAW", 0, 2, "MTE2", "V", (("k", 1),), True) in deps
    assert ("RAW", 1, 2, "MTE2", "V", (("k", 1),), True) in deps
    assert ("RAW", 2, 3, "V", "MTE3", (("k", 1),), True) in deps
    # loop-carried WARs: the next iteration's load/add overwrite what this one reads
    assert ("WAR", 2, 0, "V", "MTE2", (("k", 1),), False) in deps
    assert ("WAR", 3, 2, "MTE3", "V", (("k", 1),), False) in deps
    # same-pipe WAW (MTE2 and V need PipeBarrier between overlapping writes)
    assert ("WAW", 2, 2, "V", "V", (("k", 1),), False) in deps
    assert len(deps) == 9


def test_vadd_double_buffer_distance_two() -> None:
    deps = _dep_table(vadd_kernel(copies=2))
    assert ("WAR", 2, 0, "V", "MTE2", (("k", 2),), False) in deps
    assert ("WAR", 3, 2, "MTE3", "V", (("k", 2),), False) in deps
    assert ("RAW", 0, 2, "MTE2", "V", (("k", 2),), True) in deps


def test_blocks_do_not_depend_on_each_other() -> None:
    d = analyze_dependences(vadd_kernel(blocks=2))
    raw = d.between(0, 2)[0]
    # all pairs share block_idx
    rel = raw.relation
    assert rel.intersect(isl.Map("{ S0[b, k] -> S2[b2, k2] : b2 != b }")).is_empty()


def test_dma_rounds_ub_rows_to_blocks_and_brcb_reads_blocks() -> None:
    d = analyze_dependences(row_max_sub_kernel())
    acc = {(a.instr, a.kind, a.space): a.relation for a in d.accesses}
    # vec_reduce writes m_ub exactly: 16 fp32 = 64 bytes
    m_w = acc[(1, "W", "m_ub")].range()
    assert m_w.count_val().to_python() == 64
    # the broadcast source of the sub reads one 32-byte block per row: 16 rows x 32 B
    mb_r = acc[(3, "R", "mb_ub")].range()
    assert mb_r.count_val().to_python() == 16 * 32
    assert ("RAW", 2, 3, "V", "V", (), True) in _dep_table(row_max_sub_kernel())


def test_dma_ub_side_rounds_partial_rows() -> None:
    k = vadd_kernel()
    # a 3-element fp16 row at element 5 covers bytes 10..15 -> block 0..31
    ins = Instr("copy_gm_ub", Pipe.MTE2, (view("x_ub", 5, 1, 16, 3),), (view("x", 0, 1, 16, 3),))
    k2 = k.replace_body(k.programs[0].core, (ins,))
    d = analyze_dependences(k2)
    ub = next(a for a in d.accesses if a.space == "x_ub").relation.range()
    gm = next(a for a in d.accesses if a.space == "x").relation.range()
    assert ub.count_val().to_python() == 32
    assert gm.count_val().to_python() == 6


def test_mod_copy_index_is_quasi_affine() -> None:
    infos = kernel_instrs(vadd_kernel(copies=2))
    assert infos[0].domain.dim(isl.dim_type.set) == 2  # block_idx, k
    d = analyze_dependences(vadd_kernel(copies=2))
    acc = next(a for a in d.accesses if a.instr == 0 and a.space == "x_ub").relation
    # iteration 1 writes copy 1: bytes 4096..8191
    r = acc.intersect_domain(isl.Set("{ S0[0, 1] }")).range()
    assert r.dim_min_val(0).to_python() == 4096


def test_unbound_variable_is_not_affine() -> None:
    k = vadd_kernel()
    bad = Instr("copy_gm_ub", Pipe.MTE2, (view("x_ub", Affine.of("n"), 1, 16, 16),),
                (view("x", 0, 1, 16, 16),))
    k2 = k.replace_body(k.programs[0].core, (For("k", 2, (bad,)),))
    with pytest.raises(NotAffineError, match="'n'") as e:
        analyze_dependences(k2)
    # the message names the region and its statement (formatted only when raised)
    assert r"in region x_ub@(n)[1:16, 16:1] of S0 (copy_gm_ub) uses 'n'" in str(e.value)


def test_unbound_variable_in_a_condition_is_not_affine() -> None:
    k = vadd_kernel()
    (loop,) = k.programs[0].body
    k2 = k.replace_body(k.programs[0].core, (If((Cond(Affine.of("q"), "<=", 0),), (loop,)),))
    with pytest.raises(NotAffineError, match=r"in condition q <= 0 uses 'q'"):
        analyze_dependences(k2)


def test_dependence_kinds_are_strings() -> None:
    assert str(DepKind.WAR) == "WAR"


def _general(kernel: Kernel, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN202
    """The dependences of ``kernel`` with the byte-set shortcuts off (every pair joined)."""
    from ascendsched.lower import polyhedral

    plain = polyhedral.instr_accesses
    with monkeypatch.context() as m:
        m.setattr(polyhedral, "instr_accesses", lambda k, info: [
            replace(a, fixed=False, block_free=False) for a in plain(k, info)])
        m.setattr(polyhedral, "inner_only", lambda *args: False)
        return analyze_dependences(kernel)


_PLANNED = [
    lambda: lower(schedule_for(L.gemm(300, 200, 520)), stop_after="apply memory plan"),
    lambda: lower(schedule_for(L.layernorm(100, 512)), stop_after="apply memory plan"),
    lambda: lower(schedule_for(L.softmax(9, 6144)), stop_after="apply memory plan"),
    lambda: lower(schedule_for(L.gemm_gelu(100, 300, 64)), stop_after="apply memory plan"),
    lambda: lower(schedule_for(L.rmsnorm(1000, 4096)), stop_after="apply memory plan"),
    lambda: lower(schedule_for(L.softmax(1000, 16384)), stop_after="apply memory plan"),
    lambda: lower(schedule_for(L.gemm_softmax(200, 300, 64)), stop_after="apply memory plan"),
]
_PLANNED_IDS = ["gemm tile classes", "layernorm rows", "softmax wide rows", "gemm_gelu mixed",
                "rmsnorm row loops and tail", "softmax row pieces", "gemm_softmax row classes"]


@pytest.mark.parametrize("make", _PLANNED, ids=_PLANNED_IDS)
def test_cover_and_full_masks_bound_the_byte_sets(make) -> None:  # noqa: ANN001
    # per region, the cover mask is the blocks its bytes touch at all and the full mask blocks
    # they fill: disjoint covers prove disjoint bytes, a cover meeting the other side's full
    # blocks proves they meet, without isl (a scalar or a masked tail touches part of a block).
    # Where the two are equal, the bytes are exactly those blocks (``part_blocks``).
    k = make()
    partial = whole = 0
    for info in kernel_instrs(k):
        for a in instr_accesses(k, info):
            if a.touched is None:
                continue
            for (cover, full), got in zip(a.touched, a.part_bytes, strict=True):
                touched: set[int] = set()
                got.apply(isl.Map(f"{{ M_{a.space}[b] -> K[floor(b / 32)] }}")).foreach_point(
                    lambda p, out=touched: out.add(
                        p.get_coordinate_val(isl.dim_type.set, 0).to_python()))
                assert {j for j in range(cover.bit_length()) if cover >> (8 * j) & 1} \
                    == touched, (info.instr, a.space)
                for j in range(full.bit_length()):
                    if full >> (8 * j) & 1:
                        block = isl.Set(f"{{ M_{a.space}[b] : {32 * j} <= b < {32 * j + 32} }}")
                        assert block.is_subset(got), (info.instr, a.space, j)
                partial += cover != full
                whole += cover == full
    assert partial >= 1 and whole >= 8


@pytest.mark.parametrize("make", _PLANNED, ids=_PLANNED_IDS)
def test_byte_set_shortcuts_find_the_same_dependences(make, monkeypatch) -> None:  # noqa: ANN001
    # accesses touching the same bytes in every instance (or every block) are decided on byte
    # sets, without joining their relations: the dependences, their levels, regions and
    # relations are exactly those of the general analysis (both before dropping the ones a
    # tighter one implies, which the general path cannot tell: next test)
    from ascendsched.lower import polyhedral

    monkeypatch.setattr(polyhedral, "_without_implied", lambda deps, instrs, total: tuple(deps))
    k = make()
    fast, general = analyze_dependences(k), _general(k, monkeypatch)

    def key(d):  # noqa: ANN001, ANN202
        return (d.kind, d.space, d.src, d.dst, d.src_tensors, d.dst_tensors, d.common_loops,
                d.carried, d.loop_independent)

    assert [key(d) for d in fast] == [key(d) for d in general]
    assert all(a.relation.is_equal(b.relation) for a, b in zip(fast, general, strict=True))
    shortcut = [a for i in fast.instrs for a in instr_accesses(k, i) if a.fixed or a.block_free]
    assert len(shortcut) >= 3


def test_fixed_pairs_in_box_domains_read_their_levels_off_the_loops(monkeypatch) -> None:
    # the AIV program of a mixed kernel guards its tile classes on block_idx alone, so its
    # statements' domains are boxes: most fixed pairs take their levels from the loops
    # (dependence_pairs._box_levels) instead of isl; the previous test checks they are the same
    from ascendsched.lower import dependence_pairs

    boxed: list = []
    box_levels = dependence_pairs._box_levels
    monkeypatch.setattr(dependence_pairs, "_box_levels", lambda *a: boxed.append(
        box_levels(*a)) or boxed[-1])
    deps = analyze_dependences(_PLANNED[6]())
    decided = [b for b in boxed if b is not None]
    assert len(decided) >= len(boxed) // 2 and any(b == () for b in decided)
    assert any(d.carried and not d.loop_independent for d in deps)


@pytest.mark.parametrize("shape", ["block guard", "no trip", "block guard, no trip"])
def test_box_levels_agree_with_isl_on_guarded_and_empty_loops(shape, monkeypatch) -> None:  # noqa: ANN001
    # a guard naming block_idx alone keeps the domains boxes (only block 0 runs the tiles of
    # the double-buffered vadd on 2 blocks): the levels read off the loops are exactly isl's.
    # A loop of no trip has no instance: its accesses touch no byte (their block masks were
    # an IndexError) and it depends on nothing
    k = vadd_kernel(n=8192, tile=2048, copies=2, blocks=2)
    (loop,) = k.program(CoreType.AIV).body
    if "no trip" in shape:
        loop = replace(loop, extent=0)
    body = (If((Cond(Affine.of(BLOCK_IDX), "<=", 0),), (loop,)),) if "guard" in shape \
        else (loop,)
    k = k.with_programs((Program(CoreType.AIV, body),))
    fast, general = analyze_dependences(k), _general(k, monkeypatch)
    assert [(d.src, d.dst, d.kind, d.carried, d.loop_independent) for d in fast] == \
        [(d.src, d.dst, d.kind, d.carried, d.loop_independent) for d in general]
    assert all(a.relation.is_equal(b.relation) for a, b in zip(fast, general, strict=True))
    assert (len(fast) == 0) == ("no trip" in shape)


def test_accesses_varying_only_in_inner_loops_are_decided_as_fixed(monkeypatch) -> None:
    # RMSNorm 1000x4096 multiplies each row of a 2-row tile in a loop of its own: those
    # accesses vary with that loop alone, so against a statement sharing only the tile loop
    # they touch the same bytes in every tile (dependence_pairs.inner_only); the dependences are
    # those of the general analysis (test above), reached without joining the relations
    from ascendsched.lower import polyhedral

    k = _PLANNED[4]()
    seen = []
    inner = polyhedral.inner_only

    def spy(a, info, m):  # noqa: ANN001, ANN202
        got = inner(a, info, m)
        if got and not a.fixed:
            seen.append((info.id, a.space))
        return got

    monkeypatch.setattr(polyhedral, "inner_only", spy)
    analyze_dependences(k)
    in_row_loops = {i.id for i in kernel_instrs(k) if len(i.loops) == 2}
    assert len(in_row_loops) == 3 and {i for i, _ in seen} == in_row_loops


@pytest.mark.parametrize("make", [
    lambda: schedule_for(L.gemm_bias_gelu(1000, 1000, 1000)),  # five epilogue class loops
    lambda: schedule_for(L.gemm_residual(1000, 1000, 1000)),
    lambda: schedule_for(L.layernorm(16384, 256)),  # a peeled tail tile after the row loop
    lambda: schedule_for(L.softmax(16384, 256)),
    lambda: schedule_for(L.gemm(1000, 1000, 1000)),  # tile classes
], ids=["gemm_bias_gelu tails", "gemm_residual tails", "layernorm tail tile", "softmax",
        "gemm tails"])
def test_dependences_a_tighter_one_implies_are_ordered_in_the_lowered_kernel(
        make, monkeypatch) -> None:  # noqa: ANN001
    # analyze_dependences leaves out a dependence between statements with no common loop when
    # one from a statement no earlier on its pipe to one no later on its pipe, every instance
    # pair dependent, implies it: the kernel lowered from the rest must order every one of them
    from ascendsched.lower import polyhedral
    from ascendsched.lower.happens_before import unordered_dependences

    sched = make()
    k = lower(sched)
    with monkeypatch.context() as m:
        m.setattr(polyhedral, "_without_implied", lambda deps, instrs, total: tuple(deps))
        every = analyze_dependences(k)
    kept = analyze_dependences(k)
    assert len(kept) < len(every) and kept.implied == len(every) - len(kept)
    assert f"({kept.implied} more left out" in str(kept)  # explain says so
    # GM dependences between cores' work are the cross-core flags' (not this oracle's)
    on_chip = replace(every, deps=tuple(d for d in every if d.space not in k.param_map))
    assert unordered_dependences(k, on_chip, k.target, by_channel=False) == ()
