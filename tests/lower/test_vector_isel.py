"""Vector instruction selection over wide rows: multi-repeat instructions, a masked tail and IR
loops, so the number of statements does not grow with the row width; the orientation that
issues fewer dynamic calls; the 910B limits (repeats, repeat strides, WholeReduce destination
alignment)."""

from __future__ import annotations

import math

import pytest

from ascendsched.algo import library as L
from ascendsched.lower.build_loop_nest import build_loop_nest
from ascendsched.lower.ir import Dim, For, Instr, Kernel, iter_instrs
from ascendsched.target import CoreType
from tests.kit.reference import LAYERNORM, RMSNORM, SOFTMAX, row_tiles


def _vector(k: Kernel) -> list[tuple[Instr, tuple]]:
    return [(i, enc) for i, enc in iter_instrs(k.program(CoreType.AIV).body)
            if i.op.startswith("vec_")]


def _only(k: Kernel, comment: str) -> list[tuple[Instr, list[For]]]:
    return [(i, [e for e in enc if isinstance(e, For) and e.var != "i_o"])
            for i, enc in _vector(k) if i.comment == comment]


def _size(k: Kernel) -> tuple[int, int]:
    """(instructions, IR lines) of an unsynchronised kernel."""
    return len(list(iter_instrs(k.program(CoreType.AIV).body))), len(str(k).splitlines())


@pytest.mark.parametrize("widths", [(1024, 2048, 4096), (1000, 2024, 3048)],
                         ids=["whole chunks", "masked tails"])
def test_statement_count_does_not_grow_with_the_row_width(widths):
    sizes = {w: _size(build_loop_nest(row_tiles(L.layernorm(8, w), 2, LAYERNORM))) for w in widths}
    assert len({n for n, _ in sizes.values()}) == 1, sizes
    # IR lines (loop headers) may differ by the reduction's path, never grow with the width
    # (a row of whole chunks is halved three times before WholeReduce: select_reduce._halve)
    lines = [sizes[w][1] for w in sorted(widths)]
    assert lines == sorted(lines, reverse=True), sizes


def test_rows_of_many_chunks_take_one_instruction_per_row():
    # 8 rows x 4096 fp32 against a Brcb'd per-row max (read with block stride 0 and repeat
    # stride 0): per row two calls of 32 repeats, one per phase (the next test), not 64 calls
    # of 8 repeats
    k = build_loop_nest(row_tiles(L.softmax(8, 4096), 8, SOFTMAX))
    subs = _only(k, "e: sub")
    assert [[lp.extent for lp in loops] for _, loops in subs] == [[8], [8]]
    (sub, loops), _ = subs
    r = loops[0].var
    assert str(sub.writes[0].offset) == f"4096*{r}"
    assert sub.writes[0].dims == (Dim(32, 128), Dim(64, 1))
    assert sub.reads[1].dims == (Dim(32, 0), Dim(64, 0))
    assert str(sub.reads[1].offset) == f"8*{r}"


def test_rows_of_many_chunks_against_a_brcb_block_run_in_two_phases():
    # 2 rows x 4096 fp32: per row, the even 256 B chunks (repeat stride 512 B: one half of
    # the bank groups) against the first Brcb copy, then the odd ones against the second
    # copy 256 B on; the planner puts each copy in the other half (lower/bank_groups.py)
    k = build_loop_nest(row_tiles(L.softmax(2, 4096), 2, SOFTMAX))
    subs = _only(k, "e: sub")
    assert len(subs) == 2 and all([lp.extent for lp in loops] == [2] for _, loops in subs)
    (even, loops), (odd, _) = subs
    r = loops[0].var
    assert [str(i.writes[0].offset) for i, _ in subs] == [f"4096*{r}", f"4096*{r} + 64"]
    assert even.writes[0].dims == odd.writes[0].dims == (Dim(32, 128), Dim(64, 1))
    assert [str(i.reads[1].offset) for i, _ in subs] == [f"8*{r}", f"8*{r} + 64"]
    assert even.reads[1].dims == (Dim(32, 0), Dim(64, 0))
    brcb = [i for i, _ in _vector(k) if i.op == "vec_brcb" and i.writes[0].tensor ==
            even.reads[1].tensor]
    assert [str(i.writes[0].offset) for i in brcb] == ["0", "64"]


def test_float32_rows_of_whole_chunks_reduce_by_blockreduce_levels():
    # 8 rows x 4096 fp32 back to back: BlockReduce 512 repeats (a loop of 2 calls of 255 and
    # one of 2) -> 8 x 512 partials, BlockReduce 64 repeats -> 8 x 64, then one WholeReduce
    # repeat per row
    k = build_loop_nest(row_tiles(L.softmax(8, 4096), 8, SOFTMAX))
    blk = [(i, lp) for i, lp in _only(k, "mx: max of each 32 B block")]
    assert [i.reads[0].dims[0].extent * (lp[0].extent if lp else 1) for i, lp in blk] == [510, 2, 64]
    assert all(i.writes[0].dims == (Dim(i.reads[0].dims[0].extent, 8), Dim(8, 1)) for i, _ in blk)
    [(last, _)] = _only(k, "mx: max over k")
    assert last.reads[0].dims == (Dim(8, 64), Dim(64, 1))


def test_a_division_by_a_row_value_divides_once_per_row_and_multiplies_the_row():
    # y = e[i, j] / s[i] over 8 rows x 4096 fp32: one Div over the 8 row sums (1 / s, of a
    # Duplicate'd 1), then a Mul per row by the Brcb'd result: no Div repeat over the row
    k = build_loop_nest(row_tiles(L.softmax(8, 4096), 8, SOFTMAX))
    divs = [i for i, _ in _vector(k) if i.attr("fn") == "div"]
    assert len(divs) == 1 and divs[0].writes[0].dims[-1].extent == 8
    (mul, loops), _ = _only(k, "y: mul")  # two phases per row
    assert [lp.extent for lp in loops] == [8] and mul.writes[0].dims == (Dim(32, 128), Dim(64, 1))
    assert mul.reads[1].dims == (Dim(32, 0), Dim(64, 0))


def test_many_short_rows_take_one_instruction_per_chunk():
    # 64 rows x 128 fp32: 2 calls of 64 repeats (not 64 calls of 2 repeats)
    k = build_loop_nest(row_tiles(L.softmax(64, 128), 64, SOFTMAX))
    [(sub, loops)] = _only(k, "e: sub")
    assert [lp.extent for lp in loops] == [2]
    assert str(sub.writes[0].offset) == f"64*{loops[0].var}"
    assert sub.writes[0].dims == (Dim(64, 128), Dim(64, 1))
    assert sub.reads[1].dims == (Dim(64, 8), Dim(64, 0))


def test_a_row_tail_is_one_masked_instruction_over_allrow_tiles():
    k = build_loop_nest(row_tiles(L.softmax(40, 1000), 8, SOFTMAX))
    (full, loops), (tail, tail_loops) = _only(k, "e: sub")
    assert [lp.extent for lp in loops] == [8] and tail_loops == []
    assert full.writes[0].dims == (Dim(15, 64), Dim(64, 1))
    assert str(tail.writes[0].offset) == "960"
    assert tail.writes[0].dims == (Dim(8, 1000), Dim(40, 1))


def test_rows_beyond_the_repeat_stride_limit_take_their_tail_in_the_row_loop():
    # rows of 4104 fp32 = 513 blocks apart (max_rep_stride 255): no instruction may repeat
    # over rows, so each row gets its chunks and its 4-lane tail (only gamma's one row, cast
    # to y_t8, has its tail outside the loop)
    k = build_loop_nest(row_tiles(L.rmsnorm(8, 4100), 2, RMSNORM))
    stride_limit = k.target.max_rep_stride * k.target.block_bytes
    for i, _ in _vector(k):  # (a WholeReduce's dst stride counts results, not blocks)
        for r in i.reads + (() if i.op == "vec_reduce" else i.writes):
            if r.dims[0].extent > 1:
                assert r.dims[0].stride * k.dtype_of(r.tensor).bytes <= stride_limit, i
    tails = [(i, any(isinstance(e, For) and e.extent == 2 for e in enc))
             for i, enc in _vector(k) if i.writes[0].dims[-1].extent == 4]
    assert {i.comment for i, in_row_loop in tails if in_row_loop} == {
        "xf: cast", "ss: mul", "y: mul", "y: cast"}
    assert {i.writes[0].tensor for i, in_row_loop in tails if not in_row_loop} == {"y_t8"}


def test_wide_reductions_keep_max_min_destinations_on_two_elements():
    # WholeReduceMax/Min dst: 2 * sizeof(T) (the library's check, asc-devkit impl/basic_api/
    # kernel_operator_vec_reduce_intf_impl.h:177); WholeReduceSum dst: sizeof(T) (docs
    # ReduceRepeat.md:171-172), so sums may land on any element
    odd_sums = 0
    for sched in (row_tiles(L.softmax(40, 1000), 8, SOFTMAX), row_tiles(L.layernorm(8, 1000), 2, LAYERNORM),
                  row_tiles(L.rmsnorm(8, 4100), 2, RMSNORM), row_tiles(L.layernorm(8, 8192), 2, LAYERNORM)):
        k = build_loop_nest(sched)
        for i, _ in _vector(k):
            if i.op == "vec_reduce":
                off = i.writes[0].offset
                even = off.const % 2 == 0 and all(c % 2 == 0 for _, c in off.terms)
                assert even or i.attr("fn") == "sum", i
                odd_sums += not even
                assert i.writes[0].dims[0].extent <= k.target.max_repeat
    assert odd_sums  # the sum partials no longer skip a slot


def test_an_odd_number_of_chunks_puts_the_max_identity_between_the_partials_and_the_tail():
    # 1000 = 15 x 64 + 40: max partials in slots 0..14, the tail's in slot 16 (two-element
    # alignment), slot 15 holds -inf; sum partials take slots 0..15 with no identity slot
    k = build_loop_nest(row_tiles(L.softmax(40, 1000), 8, SOFTMAX))
    dups = {i.attr("value"): i for i, _ in _vector(k)
            if i.op == "vec_dup" and "identity" in i.comment}
    assert set(dups) == {-math.inf}
    assert all(str(d.writes[0].offset) == "8" and d.writes[0].dims == (Dim(8, 24), Dim(8, 1))
               for d in dups.values())
    [(tails, _)] = _only(k, "s: sum of the 40-column tails")
    assert str(tails.writes[0].offset) == "15"
    [(mtails, _)] = _only(k, "mx: max of the 40-column tails")
    assert str(mtails.writes[0].offset) == "16"


def test_many_short_rows_fold_their_chunks_in_a_loop():
    # 32 rows x 260 fp32 (4 chunks + 4 lanes): folding the chunks elementwise takes 5 calls
    # of 32 repeats, a WholeReduce per row 33
    k = build_loop_nest(row_tiles(L.softmax(64, 260), 32, SOFTMAX))
    folds = _only(k, "s: sum partials += a chunk")
    assert [[lp.extent for lp in loops] for _, loops in folds] == [[3]]
    assert folds[0][0].writes[0].dims == (Dim(32, 64), Dim(64, 1))
    [(tail, loops)] = _only(k, "s: sum partials += the tail")
    assert loops == [] and tail.writes[0].dims == (Dim(32, 64), Dim(4, 1))


def test_a_subexpression_met_twice_is_computed_once():
    """var[i] = sum_k d[i, k] * d[i, k] with d = float32(x) - mean inlined: the cast and
    the subtraction run once per tile and the product reads their value twice (they ran
    twice before), and the kernel still equals numpy race-free."""
    from ascendsched.algo.algorithm import algorithm
    from ascendsched.algo.ops import reduce_sum
    from ascendsched.algo.tensor import compute, placeholder, reduce_axis
    from ascendsched.api.check import check
    from ascendsched.lower.pipeline import lower
    from ascendsched.schedule import Schedule

    x = placeholder("x", (40, 320), "float16")
    mean = placeholder("mean", (40,), "float32")
    d = compute("d", (40, 320), lambda i, j: x[i, j].astype("float32") - mean[i])
    k = reduce_axis(320, "k")
    var = compute("var", (40,), lambda i: reduce_sum(d[i, k] * d[i, k], k))
    s = Schedule(algorithm("variance", var)).split("var", "i", 8).compute_inline("d")
    ops = [i.op for p in lower(s).programs for i, _ in iter_instrs(p.body)]
    assert ops.count("vec_cast") == 1 and ops.count("vec_binary") == 2  # sub, mul
    assert all(v.ok for v in check(s, cpp=False))
