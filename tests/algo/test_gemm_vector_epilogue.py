"""Splitting a GEMM + elementwise steps into the Cube part and the Vector part, the schedule
that picks a unit for the epilogue, and the errors of both."""

from __future__ import annotations

import pytest

from ascendsched.algo import algorithm, compute, placeholder, reduce_axis, reduce_sum
from ascendsched.algo.gemm_spec import match_gemm
from ascendsched.algo.gemm_vector_epilogue import EpilogueInput, split_vector_epilogue
from ascendsched.algo.library import gemm_epilogue, gemm_gelu, gemm_row_scale, gemm_softmax
from ascendsched.algo.ops import exp, reduce_max, relu
from ascendsched.errors import ScheduleError, UnsupportedError
from ascendsched.schedule.gemm import GemmSchedule

M, N, K = 33, 47, 70


def _c():
    a, b = placeholder("A", (M, K)), placeholder("B", (K, N))
    k = reduce_axis(K, "k")
    return compute("C", (M, N), lambda i, j: reduce_sum(
        a[i, k].astype("float32") * b[k, j].astype("float32"), k))


def test_gelu_splits_into_the_sum_and_the_elementwise_rest() -> None:
    s = split_vector_epilogue(gemm_gelu(M, N, K))
    assert str(match_gemm(s.cube)) == ("gemm gemm_gelu: (33 x 70) x (70 x 47), float16 -> "
                                       "float32 -> float32")
    epi = s.epilogue
    assert (epi.workspace, epi.output, s.acc_name) == ("C_ws", "D", "C")
    assert epi.inputs == (EpilogueInput("C_ws", (0, 1)),)
    assert [t.name for t in epi.algo.stages] == ["C", "D"]
    assert str(epi.algo.tensor("C").op.body) == "C_ws[i, j]"


def test_row_scale_input_follows_the_rows_and_the_tile_algorithm_is_tile_sized() -> None:
    epi = split_vector_epilogue(gemm_row_scale(M, N, K)).epilogue
    assert epi.inputs == (EpilogueInput("C_ws", (0, 1)), EpilogueInput("s", (0,)))
    tile = epi.tile_algorithm(16, 32)
    assert {t.name: list(t.shape) for t in tile.tensors} == {
        "C_ws": [16, 32], "s": [16], "C": [16, 32], "D": [16, 32]}


def test_an_inlined_epilogue_gets_its_own_accumulator_stage() -> None:
    a, b = placeholder("A", (M, K)), placeholder("B", (K, N))
    k = reduce_axis(K, "k")
    d = compute("D", (M, N), lambda i, j: exp(reduce_sum(
        a[i, k].astype("float32") * b[k, j].astype("float32"), k)).astype("float16"))
    s = split_vector_epilogue(algorithm("g", d))
    assert s.acc_name == "D_acc" and s.epilogue.workspace == "D_ws"
    assert str(s.epilogue.algo.outputs[0].op.body) == "float16(exp(D_ws[i, j]))"


def _row_max(c):  # noqa: ANN001, ANN202
    n = reduce_axis(N, "n")
    e = compute("E", (M, N), lambda i, j: exp(c[i, j]))
    return compute("D", (M,), lambda i: reduce_max(e[i, n], n))


def _col_sum(c):  # noqa: ANN001, ANN202
    m = reduce_axis(M, "m")
    s = compute("S", (N,), lambda j: reduce_sum(c[m, j], m))
    return compute("D", (M, N), lambda i, j: c[i, j] - s[j])


@pytest.mark.parametrize("body, match", [
    (_row_max, r"output 'D' has shape \[33\], not the GEMM's \[33, 47\]; a Vector epilogue "
               r"computes the GEMM result's shape"),
    (_col_sum, r"stage 'S' after the GEMM has shape \[47\], neither the output's \[33, 47\] "
               r"nor its rows' \[33\]"),
    (lambda c: compute("D", (M, N), lambda i, j: c[i, j] - c[0, j]),
     r"stage 'D' reads C\[0, j\]; after the GEMM 'C' a Vector epilogue reads tensors only at "
     r"the output's own axes"),
    (lambda c: compute("D", (M, N), lambda i, j: c[i, j]
                       * placeholder("r", (N, N), "float32")[j, j]),
     r"reads r\[j, j\].*a matrix \[i, j\], a row vector \[i\] or a column vector \[j\]"),
])
def test_a_vector_part_that_is_not_elementwise_is_named(body, match) -> None:  # noqa: ANN001
    with pytest.raises(UnsupportedError, match=match):
        split_vector_epilogue(algorithm("g", body(_c())))


def test_the_schedule_puts_a_fixpipe_epilogue_on_the_fixpipe_unless_asked() -> None:
    algo = gemm_epilogue(64, 64, 64, relu=True)
    assert GemmSchedule(algo).vector_epilogue is None
    s = GemmSchedule(algo).tile(32, 32, 32).epilogue_on("vector", rows=8)
    assert s.vector_epilogue is not None and s.spec.epilogue.relu is False
    assert str(s).endswith(".epilogue_on('vector', rows=8)")
    g = GemmSchedule(gemm_gelu(M, N, K))  # GELU: the Vector cores without being asked
    assert g.vector_epilogue is not None and g.copies("workspace") == 2


def test_schedule_errors_name_the_call_the_limit_and_the_fix() -> None:
    with pytest.raises(UnsupportedError, match=r"stage 'D' applies .*Fixpipe"):
        GemmSchedule(gemm_gelu(M, N, K)).epilogue_on("fixpipe")
    s = GemmSchedule(gemm_gelu(M, N, K)).tile(32, 32, 32)
    with pytest.raises(ScheduleError, match=r"buffer\('workspace', copies=16\): the slot-free "
                       r"cross-core flag .* at most 15 pending sets .* 1 <= copies <= 15"):
        s.buffer("workspace", 16)
    with pytest.raises(ScheduleError, match=r"no Vector epilogue, so no workspace; add "
                       r"\.epilogue_on\('vector'\)"):
        GemmSchedule(gemm_epilogue(64, 64, 64)).tile(32, 32, 32).buffer("workspace", 2)
    with pytest.raises(ScheduleError, match=r"epilogue_on\('cube'\): the unit is one of "
                       r"'fixpipe', 'vector'"):
        s.epilogue_on("cube")
    with pytest.raises(ScheduleError, match=r"rows is a positive int"):
        s.epilogue_on("vector", rows=0)


def test_relu_after_a_scale_is_not_a_fixpipe_step_but_runs_on_the_vector() -> None:
    c = _c()
    v = placeholder("v", (N,), "float32")
    d = compute("D", (M, N), lambda i, j: relu(c[i, j] * v[j]).astype("float16"))
    s = GemmSchedule(algorithm("g", d))
    assert s.vector_epilogue is not None
    assert s.vector_epilogue.inputs[1] == EpilogueInput("v", (1,))


def test_a_vector_step_over_ub_names_epilogue_on_and_the_fix() -> None:
    from ascendsched.errors import CapacityError
    from ascendsched.lower.pipeline import lower

    # one Vector core per block: its step is the whole 128-row tile
    s = GemmSchedule(gemm_gelu(256, 512, 64)).tile(128, 256, 64).epilogue_on(
        "vector", rows=128, vector_cores=1)
    with pytest.raises(CapacityError, match=r"(?s)UB buffers need .*the Vector epilogue's step of 128 "
                       r"x 256 columns .* from \.epilogue_on\('vector', rows=128, "
                       r"vector_cores=1\) .* Try \.epilogue_on\('vector', rows=64, "
                       r"vector_cores=1\) or a smaller tile n"):
        lower(s, stop_after="memory plan")


def test_softmax_after_a_gemm_reduces_whole_rows_so_narrower_tiles_make_row_blocks() -> None:
    s = GemmSchedule(gemm_softmax(40, 100, 64))
    epi = s.vector_epilogue
    assert epi is not None and epi.rowwise == ("mx", "sm")
    assert [t.name for t in epi.algo.stages] == ["S", "mx", "e", "sm", "P"]
    assert not s.tile(32, 112, 32).row_blocks
    blocks = s.tile(32, 64, 32)
    assert blocks.row_blocks and [(c.rows, c.cols, c.mv, c.nv) for c in blocks.tile_classes] \
        == [(1, 1, 32, 100), (1, 1, 8, 100)]
