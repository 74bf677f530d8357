"""Lifetimes, memory planning and applying the plan."""

from __future__ import annotations

import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as hs

from ascendsched.errors import BufferingWarning, CapacityError
from ascendsched.lower.affine import Affine
from ascendsched.lower.apply_memory_plan import apply_memory_plan
from ascendsched.lower.ir import Buffer, For, Instr, Kernel, Program, view
from ascendsched.lower.lifetimes import buffer_lifetimes
from ascendsched.lower.plan_memory import plan_memory
from ascendsched.target import ASCEND_910B, CoreType, Pipe, Scope
from tests.kit.ir import row_max_sub_kernel, vadd_kernel


def _spans(k: Kernel) -> dict[tuple[str, int], tuple[int | None, int | None]]:
    return {(e.buffer, e.copy): (e.start, e.end) for e in buffer_lifetimes(k).entries}


def test_vadd_lifetimes_are_per_iteration() -> None:
    # S0 load x, S1 load y, S2 add, S3 store: nothing is carried across k
    assert _spans(vadd_kernel(copies=1)) == {
        ("x_ub", 0): (0, 2), ("y_ub", 0): (1, 2), ("z_ub", 0): (2, 3)}


def test_double_buffered_copies_live_over_the_whole_loop_they_alternate_over() -> None:
    # x_ub[k % 2] ...: while one copy is filled the other is consumed, so both copies hold
    # their bytes over the whole loop body and k is a pipelined loop
    lt = buffer_lifetimes(vadd_kernel(copies=2))
    assert {(e.buffer, e.copy): (e.start, e.end) for e in lt.entries} == {
        (b, c): (0, 3) for b in ("x_ub", "y_ub", "z_ub") for c in (0, 1)}
    assert lt.of("y_ub", 1).own == ((1, 2),) and "alternate over loop k" in lt.of("y_ub", 1).why
    assert lt.pipelined == (("k", 0, 3),)


def test_loop_widening() -> None:
    k = row_max_sub_kernel()
    f32 = k.buffer_map["x_ub"].dtype
    dup = Instr("vec_dup", Pipe.V, (view("m_ub", 0, 1, 8, 8),), (), (("value", 0.0),))
    load = Instr("copy_gm_ub", Pipe.MTE2, (view("x_ub", 0, 16, 64, 64),),
                 (view("x", 0, 16, 64, 64),))
    acc = Instr("vec_binary", Pipe.V, (view("m_ub", 0, 1, 8, 8),),
                (view("m_ub", 0, 1, 8, 8), view("x_ub", 0, 1, 8, 8)), (("fn", "add"),))
    tmp_w = Instr("vec_dup", Pipe.V, (view("mb_ub", 0, 1, 8, 8),), (), (("value", 1.0),))
    tmp_r = Instr("vec_binary", Pipe.V, (view("y_ub", 0, 1, 8, 8),),
                  (view("mb_ub", 0, 1, 8, 8), view("mb_ub", 0, 1, 8, 8)), (("fn", "add"),))
    store = Instr("copy_ub_gm", Pipe.MTE3, (view("y", 0, 1, 8, 8),), (view("m_ub", 0, 1, 8, 8),))
    body = (tmp_w, For("k", 4, (load, acc, tmp_r)), store)
    k2 = Kernel.build(k.name, k.params, k.buffers + (Buffer("u_ub", Scope.UB, f32, 8),), 1,
                (Program(CoreType.AIV, (dup,) + body),), k.target)
    spans = _spans(k2)
    # positions: 0 dup m, 1 dup mb, [2 load x, 3 acc m, 4 y = mb + mb], 5 store m
    assert spans[("m_ub", 0)] == (0, 5)  # defined before, carried through k, read after
    assert spans[("mb_ub", 0)] == (1, 4)  # defined before the loop, read in it: to its end
    assert spans[("x_ub", 0)] == (2, 3)
    assert spans[("u_ub", 0)] == (None, None)
    plan = plan_memory(k2, buffer_lifetimes(k2), ASCEND_910B)
    assert plan.offsets("u_ub") == (0,)


def test_row_max_sub_reuses_dead_space_on_one_pipe() -> None:
    k = row_max_sub_kernel()
    plan = plan_memory(k, buffer_lifetimes(k), ASCEND_910B)
    text = str(plan)
    assert "peak 4672 B" in text and "without reuse 8768 B" in text
    # y = x - m writes y_ub over exactly the elements of x_ub it reads: y_ub takes x_ub's
    # bytes (in place), and that is no cross-pipe reuse
    assert ("x_ub", "y_ub") in buffer_lifetimes(k).in_place
    assert plan.offsets("y_ub") == plan.offsets("x_ub")
    assert plan.usage[0].cross_pipe_reuses == 0
    assert plan.peak(Scope.UB) == 4672 and plan.total(Scope.UB) == 8768


def test_alignment_is_respected() -> None:
    k = vadd_kernel(copies=2)
    f16 = k.buffer_map["x_ub"].dtype
    odd = Buffer("odd_ub", Scope.UB, f16, 7)  # 14 bytes -> one 32-byte slot
    ins = Instr("vec_dup", Pipe.V, (view("odd_ub", 0, 1, 7, 7),), (), (("value", 0.0),))
    body = k.programs[0].body[0]
    k2 = Kernel.build(k.name, k.params, (odd,) + k.buffers, 1,
                (Program(CoreType.AIV, (For(body.var, body.extent, (ins,) + body.body),)),),
                k.target)
    plan = plan_memory(k2, buffer_lifetimes(k2), ASCEND_910B)
    for p in plan.placements:
        assert p.offset % 32 == 0 and p.size % 32 == 0
    applied = apply_memory_plan(k2, plan)
    assert applied.buffer_map["odd_ub"].offsets is not None
    assert apply_memory_plan(applied, plan) is applied  # unchanged -> same object


def test_double_buffer_copies_are_distinct() -> None:
    k = vadd_kernel(copies=2)
    plan = plan_memory(k, buffer_lifetimes(k), ASCEND_910B)
    k2 = apply_memory_plan(k, plan)
    offs = [o for b in k2.buffers for o in b.offsets]
    assert len(set(offs)) == 6 and plan.peak(Scope.UB) == 6 * 4096


def test_capacity_error_names_buffers_and_fixes() -> None:
    k = vadd_kernel(n=65536 * 4, tile=32768, copies=2)  # 6 x 64 KB > 184 KB
    with pytest.raises(CapacityError, match="x_ub: 2 copies x 65536 B") as err:
        plan_memory(k, buffer_lifetimes(k), ASCEND_910B)
    msg = str(err.value)
    for text in ("y_ub", "z_ub", "188160 B usable", "copies=1 on x_ub", "a smaller tile"):
        assert text in msg


def _pipelined_kernel(elems: int = 20480) -> Kernel:
    """for k: x[k%2] <- GM (MTE2); y <- GM (MTE2); z = x + y; w = z * 2; u = w + x; GM <- u.

    w = z * 2 may take z's bytes in place (both on V). With strict planning nothing else
    shares bytes across pipes inside k (u on y: the next y load would wait for u's store):
    x x2 + y + z/w + u, five buffers; sharing u/y would save one."""
    k = vadd_kernel(copies=2)
    f16 = k.buffer_map["x_ub"].dtype
    cp = Affine.mod("k", 2)
    rows = elems // 128

    def v(name: str, copy: Affine | int = 0):
        return view(name, 0, rows, 128, 128, copy=copy)

    body = (
        Instr("copy_gm_ub", Pipe.MTE2, (view("x_ub", 0, 1, elems, elems, copy=cp),),
              (view("x", 0, 1, elems, elems),)),
        Instr("copy_gm_ub", Pipe.MTE2, (view("y_ub", 0, 1, elems, elems),),
              (view("y", 0, 1, elems, elems),)),
        Instr("vec_binary", Pipe.V, (v("z_ub"),), (v("x_ub", cp), v("y_ub")), (("fn", "add"),)),
        Instr("vec_scalar", Pipe.V, (v("w_ub"),), (v("z_ub"),), (("fn", "muls"), ("scalar", 2))),
        Instr("vec_binary", Pipe.V, (v("u_ub"),), (v("w_ub"), v("x_ub", cp)), (("fn", "add"),)),
        Instr("copy_ub_gm", Pipe.MTE3, (view("z", 0, 1, elems, elems),),
              (view("u_ub", 0, 1, elems, elems),)),
    )
    bufs = (Buffer("x_ub", Scope.UB, f16, elems, 2),) + tuple(
        Buffer(b, Scope.UB, f16, elems) for b in ("y_ub", "z_ub", "w_ub", "u_ub"))
    return Kernel.build("pipelined", k.params, bufs, 1,
                  (Program(CoreType.AIV, (For("k", 4, body),)),), k.target)


def _shares(plan, lt, a: str, b: str) -> bool:
    pa = [p for p in plan.placements if p.buffer == a]
    pb = [p for p in plan.placements if p.buffer == b]
    return any(x.offset < y.offset + y.size and y.offset < x.offset + x.size
               for x in pa for y in pb)


def test_no_cross_pipe_reuse_inside_a_pipelined_loop_while_ub_has_room() -> None:
    k = _pipelined_kernel(elems=8192)  # 5 x 16 KB: room for everything
    lt = buffer_lifetimes(k)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plan = plan_memory(k, lt, ASCEND_910B)
    assert not plan.compromises and plan.peak(Scope.UB) == 5 * 16384
    assert _shares(plan, lt, "z_ub", "w_ub")  # in place, one pipe
    assert not any(_shares(plan, lt, "u_ub", b) for b in ("y_ub", "z_ub", "w_ub"))


def test_cross_pipe_reuse_when_ub_is_too_small_warns_naming_the_buffers() -> None:
    k = _pipelined_kernel(elems=20480)  # 5 x 40 KB > 188160 B >= 4 x 40 KB
    lt = buffer_lifetimes(k)
    with pytest.warns(BufferingWarning, match="reuses the bytes of") as rec:
        plan = plan_memory(k, lt, ASCEND_910B)
    msg = str(rec[0].message)
    for text in ("pipelined loop k", "204800 B of UB", "u_ub reuses the bytes of y_ub", "188160 B", "copies=1 on x_ub",
                 "a smaller tile", "MTE2 on y_ub of the next iteration waits for MTE3 on u_ub"):
        assert text in msg
    assert plan.compromises == (msg,) and plan.peak(Scope.UB) <= 188160
    assert rec[0].message.warning_id == "buffering-not-honoured"
    # the copies of x_ub still share bytes with nothing
    assert not any(_shares(plan, lt, "x_ub", b) for b in ("y_ub", "z_ub", "w_ub", "u_ub"))


def test_copies_share_bytes_only_as_a_last_resort_with_a_warning() -> None:
    k = _pipelined_kernel(elems=28672)  # x x2 + y + z live at once: 4 x 56 KB > UB
    with pytest.raises(CapacityError):
        plan_memory(k, buffer_lifetimes(k), ASCEND_910B)
    from ascendsched.algo.library import softmax
    from ascendsched.lower.build_loop_nest import build_loop_nest
    from ascendsched.schedule import Schedule

    s = Schedule(softmax(64, 2048)).split("y", "i", 8)
    for st in ("xf", "mx", "e", "s"):
        s = s.compute_at(st, "y", "i_o")
    s = s.buffer("x", 2).buffer("y", 2)
    k = build_loop_nest(s, ASCEND_910B)
    with pytest.warns(BufferingWarning, match="the copies of x_ub share bytes with") as rec:
        plan = plan_memory(k, buffer_lifetimes(k), ASCEND_910B)
    assert "buffering is not honoured" in str(rec[0].message) and plan.compromises


def test_copies_never_share_bytes_with_other_buffers_inside_their_loop() -> None:
    from ascendsched.lower.build_loop_nest import build_loop_nest
    from tests.kit.reference import readme_softmax

    k = build_loop_nest(readme_softmax(copies=2), ASCEND_910B)
    lt = buffer_lifetimes(k)
    plan = plan_memory(k, lt, ASCEND_910B)
    (loop, lo, hi), = lt.pipelined
    assert loop == "i_o_k"
    for buf in ("x_ub", "y_ub"):
        for other in {e.buffer for e in lt.entries if e.used and e.buffer != buf
                      and e.start <= hi and lo <= e.end}:
            assert not _shares(plan, lt, buf, other), (buf, other)


def test_a_reuse_across_a_loop_back_edge_is_refused_when_the_wait_covers_most_of_the_body(
        ) -> None:
    """LayerNorm 1024 x 32 000 in 6400-column pieces and chunks read from GM (the default
    before it staged the row): the row loop is not pipelined (only the loop over a row's
    output chunks is), so plan 1 may put the output chunks (V -> MTE3) on the row mean's
    block sums (V): the next row's sums then wait for this row's last store. The stricter
    tries of plan 1 keep them apart."""
    from ascendsched.lower.build_loop_nest import build_loop_nest
    from ascendsched.lower.pack_scope import back_edge_wait
    from tests.kit.row_stats import layernorm_pieces

    k = build_loop_nest(layernorm_pieces(1024, 32000, 6400), ASCEND_910B)
    lt = buffer_lifetimes(k)
    assert {v for v, _, _ in lt.loops} - {v for v, _, _ in lt.pipelined} == {"i_o_k"}
    blk, out = lt.of("mean_blk4"), lt.of("y_ub", 0)
    assert back_edge_wait(lt, blk, out) == 1.0  # y_ub's last store ends the row
    assert back_edge_wait(lt, blk, lt.of("mean_t2")) == 0.0  # both V: no wait across pipes
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plan = plan_memory(k, lt, ASCEND_910B)
    assert not plan.compromises
    assert not _shares(plan, lt, "y_ub", "mean_blk4")


def test_bank_group_beats_of_two_dense_sources_follow_the_asc_add_sample() -> None:
    # ASC add sample (SOURCES.md 2.5): the second source 256 B after the first (mod 512 B) is
    # conflict-free; at the same offset mod 512 B each of 8 bank groups serves two blocks
    from ascendsched.lower.bank_groups import Footprint, beats

    def worst(b_addr: int) -> list[int]:
        return beats([Footprint(0, 256, 256), Footprint(b_addr, 256, 256)], 64, 32, 16)

    assert worst(256) == [1] * 16 and worst(8192 + 256) == [1] * 16
    assert worst(8192) == [2] * 16 and worst(512 + 32) == [2] * 16


@pytest.mark.slow
@given(a=hs.integers(0, 4095), b=hs.integers(0, 4095), turn=hs.integers(0, 15),
       spans=hs.lists(hs.sampled_from([(4, 0), (32, 0), (256, 256), (256, 512), (100, 64),
                                       (2, 4), (1024, 1024)]), min_size=2, max_size=2),
       repeats=hs.integers(1, 20), distinct=hs.booleans())
def test_bank_group_beats_do_not_change_when_both_sources_move_by_whole_blocks(
        a: int, b: int, turn: int, spans: list[tuple[int, int]], repeats: int,
        distinct: bool) -> None:
    # the memo of ReadTogether._extra keys the first source's address within its block only
    from ascendsched.lower.bank_groups import Footprint, beats

    def at(shift: int) -> list[int]:
        return beats([Footprint(a + shift, *spans[0]), Footprint(b + shift, *spans[1])],
                     repeats, 32, 16, distinct=distinct)

    assert at(32 * turn) == at(0)


def test_two_sources_of_one_vector_instruction_are_placed_in_different_bank_groups() -> None:
    # vadd: x_ub and y_ub feed one Add; first fit would put y_ub right after x_ub (8192 B, the
    # same groups). The plan moves it by 256 B: every repeat takes one beat.
    from ascendsched.algo.library import vadd
    from ascendsched.lower.bank_groups import beats, footprint
    from ascendsched.lower.ir import iter_instrs
    from ascendsched.lower.pipeline import lower
    from ascendsched.schedule.schedule import Schedule

    k = lower(Schedule(vadd(65536)).split("z", "i", 4096))
    x, y = (k.buffer_map[n].offsets[0] for n in ("x_ub", "y_ub"))
    assert (y - x) % 512 == 256
    add = next(i for p in k.programs for i, _ in iter_instrs(p.body) if i.op == "vec_binary")
    feet = [footprint(r, k.buffer_map[r.tensor].offsets[0] + r.offset.const * 2, 2)
            for r in add.reads]
    assert beats(feet, 32, 32, 16) == [1] * 16


def test_a_copy_still_in_its_partners_bank_groups_moves_to_a_free_slot_below_the_peak() -> None:
    # LayerNorm over rows of 12288: UB is full (no room for the bank-aware packings), and the
    # plain packing put the mean's Brcb block in the groups of the centred row's source, so
    # every repeat of d = xf - mean took two beats. The repair moves the 512 B block to a free
    # slot of the other groups below the peak: one beat, same peak.
    from ascendsched.algo.library import layernorm
    from ascendsched.lower.bank_groups import beats, footprint
    from ascendsched.lower.ir import iter_instrs
    from ascendsched.lower.pipeline import lower
    from ascendsched.lower.schedule_for import schedule_for

    k = lower(schedule_for(layernorm(96, 12288)))
    subs = [i for p in k.programs for i, _ in iter_instrs(p.body)
            if i.op == "vec_binary" and dict(i.attrs)["fn"] == "sub"]
    assert len(subs) == 2 and {r.tensor for i in subs for r in i.reads} == {"xf_ub", "d_brcb5"}
    for i in subs:
        feet = [footprint(r, k.buffer_map[r.tensor].offsets[0] + r.offset.const * 4, 4)
                for r in i.reads]
        assert beats(feet, i.writes[0].dims[0].extent, 32, 16) == [1] * 16
    ub = [b for b in k.buffers if b.scope == Scope.UB]
    assert max(o + b.elems * b.dtype.bytes for b in ub for o in b.offsets) > 180_000  # full


def test_the_copies_a_region_touches_are_listed_over_one_period_of_its_loop() -> None:
    """A copy index ``k % 2`` (or ``k + j``, ``3*k`` mod the copy count) takes the same values
    however long the loop runs: the list is exact for any trip count, and a floor division
    falls back to the whole range."""
    from ascendsched.lower.ir import Dim, Region
    from ascendsched.lower.lifetimes import _copies

    def region(copy: Affine) -> Region:
        return Region("x_ub", Affine(), (Dim(16, 1),), copy)

    k, j = Affine.of("k"), Affine.of("j")
    assert _copies(region(Affine.mod("k", 2)), 2, {"k": 100_000}) == [0, 1]
    assert _copies(region(Affine.mod("k", 2)), 2, {"k": 1}) == [0]
    assert _copies(region(k * 3), 3, {"k": 7}) == [0]
    assert _copies(region(k * 2), 4, {"k": 5000}) == [0, 2]
    assert _copies(region(k + j), 3, {"k": 2, "j": 1}) == [0, 1]
    assert _copies(region(k.floordiv(2)), 2, {"k": 2}) == [0]
    assert _copies(region(k.floordiv(2)), 2, {"k": 9000}) == [0, 1]  # too many: every copy
