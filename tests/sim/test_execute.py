"""run_kernel: fixture kernels against numpy, every vector op, DMA rows, memory plans, errors."""

from __future__ import annotations

import numpy as np
import pytest

from ascendsched.dtypes import DType, bfloat16, float16, float32, int16, int32, uint8
from ascendsched.errors import AscendSchedError, InternalCompilerError
from ascendsched.lower.ir import Instr, Region, view
from ascendsched.sim.execute import run_kernel
from ascendsched.target import ASCEND_910B, Pipe
from tests.kit.ir import hand_plan, kernel, row_max_sub_kernel, vadd_kernel

RNG = np.random.default_rng(7)


def f16(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float16)


def f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


# --------------------------------------------------------------------------- fixture kernels
@pytest.mark.parametrize("copies,blocks", [(1, 1), (2, 1), (1, 2), (2, 4)])
def test_vadd_fixture_matches_numpy(copies: int, blocks: int) -> None:
    n = 2048 * 8
    x, y = f16(n), f16(n)
    out = run_kernel(vadd_kernel(n, 2048, copies, blocks), {"x": x, "y": y}).outputs
    assert out["z"].dtype == np.float16
    np.testing.assert_array_equal(out["z"], x + y)


def test_row_max_sub_fixture_matches_numpy() -> None:
    x = f32(16, 64)
    out = run_kernel(row_max_sub_kernel(16, 64), {"x": x}).outputs["y"]
    np.testing.assert_array_equal(out, x - x.max(axis=1, keepdims=True))


def test_planned_memory_places_buffers_at_offsets() -> None:
    x, y = f16(8192), f16(8192)
    k = hand_plan(vadd_kernel(8192, 2048, 2, 2), {"x_ub": (0, 4096), "y_ub": (8192, 12288),
                                             "z_ub": (16384, 20480)})
    r = run_kernel(k, {"x": x, "y": y}, trace=True)
    np.testing.assert_array_equal(r.outputs["z"], x + y)
    add = next(e for e in r.trace.events if e.op == "vec_binary" and e.block == 1)
    assert add.reads == (("UB", 0, 4096), ("UB", 8192, 12288))  # copy 0 of x_ub and y_ub
    assert add.writes == (("UB", 16384, 20480),)


def test_overlapping_memory_plan_gives_wrong_numbers() -> None:
    x, y = f16(4096), f16(4096)
    k = hand_plan(vadd_kernel(4096, 2048), {"x_ub": (0,), "y_ub": (0,), "z_ub": (4096,)})
    out = run_kernel(k, {"x": x, "y": y}).outputs["z"]
    np.testing.assert_array_equal(out, y + y)  # y's load overwrote x


def test_bad_memory_plan_is_rejected() -> None:
    k = hand_plan(vadd_kernel(4096, 2048), {"x_ub": (16,), "y_ub": (4096,), "z_ub": (8192,)})
    with pytest.raises(InternalCompilerError, match=r"\(memory plan\): buffer x_ub copy 0 at byte 16 "):
        run_kernel(k, {"x": f16(4096), "y": f16(4096)})


def test_unwritten_output_is_poisoned_and_inputs_are_checked() -> None:
    body = (Instr("copy_gm_ub", Pipe.MTE2, (view("u", 0, 1, 16, 16),), (view("x", 0, 1, 16, 16),)),
            Instr("copy_ub_gm", Pipe.MTE3, (view("z", 0, 1, 16, 16),), (view("u", 0, 1, 16, 16),)))
    k = kernel([("x", (32,), float16, "input"), ("z", (32,), float16, "output")],
               [("u", float16, 16)], body)
    x = f16(32)
    z = run_kernel(k, {"x": x}).outputs["z"]
    np.testing.assert_array_equal(z[:16], x[:16])
    assert np.isnan(z[16:]).all()
    with pytest.raises(AscendSchedError, match="missing input x"):
        run_kernel(k, {})
    with pytest.raises(AscendSchedError, match="shape"):
        run_kernel(k, {"x": f16(31)})


# --------------------------------------------------------------------------- one-op harness
def one_op(ops: tuple[Instr, ...], ins: dict[str, tuple[np.ndarray, DType]],
           outs: dict[str, tuple[int, DType]], *, trace: bool = False):
    """Load each input into a UB buffer of the same name, run ``ops``, store each output buffer.

    Buffers are flat; inputs are loaded and outputs stored as one row of all their elements.
    """
    params, buffers, body = [], [], []
    for name, (a, d) in ins.items():
        params.append((f"g_{name}", (a.size,), d, "input"))
        buffers.append((name, d, a.size))
        body.append(Instr("copy_gm_ub", Pipe.MTE2, (view(name, 0, 1, a.size, a.size),),
                          (view(f"g_{name}", 0, 1, a.size, a.size),)))
    body.extend(ops)
    for name, (size, d) in outs.items():
        params.append((f"g_{name}", (size,), d, "output"))
        buffers.append((name, d, size))
        body.append(Instr("copy_ub_gm", Pipe.MTE3, (view(f"g_{name}", 0, 1, size, size),),
                          (view(name, 0, 1, size, size),)))
    k = kernel(params, buffers, tuple(body))
    r = run_kernel(k, {f"g_{n}": a.ravel() for n, (a, _) in ins.items()}, trace=trace)
    res = {n: r.outputs[f"g_{n}"] for n in outs}
    return (res, r.trace) if trace else res


def vop(op: str, dst: Region, *srcs: Region, **attrs: object) -> Instr:
    return Instr(op, Pipe.V, (dst,), tuple(srcs), tuple(attrs.items()))


@pytest.mark.parametrize("fn,ref", [("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
                                    ("div", np.divide), ("max", np.maximum),
                                    ("min", np.minimum)])
def test_vec_binary_fp32(fn: str, ref) -> None:
    a, b = f32(4, 64), f32(4, 64)
    v = view("a", 0, 4, 64, 64)
    out = one_op((vop("vec_binary", view("d", 0, 4, 64, 64), v, view("b", 0, 4, 64, 64), fn=fn),),
                 {"a": (a, float32), "b": (b, float32)}, {"d": (256, float32)})
    np.testing.assert_array_equal(out["d"].reshape(4, 64), ref(a, b))


def test_vec_binary_fp16_row_strides_touch_only_the_view() -> None:
    a, b = f16(4, 256), f16(4, 256)
    ops = (vop("vec_binary", view("d", 0, 4, 256, 128), view("a", 128, 4, 256, 128),
               view("b", 0, 4, 256, 128), fn="add"),)
    out = one_op(ops, {"a": (a, float16), "b": (b, float16)}, {"d": (1024, float16)})
    d = out["d"].reshape(4, 256)
    np.testing.assert_array_equal(d[:, :128], a[:, 128:] + b[:, :128])
    assert (d[:, 128:] == 0).all()  # untouched on-chip memory starts zeroed


def test_block_broadcast_source_reads_element_r0_and_the_whole_block() -> None:
    a = f16(4, 128)
    m = np.repeat(f16(4, 1), 16, axis=1)  # one uniform 32 B block per row
    ops = (vop("vec_binary", view("d", 0, 4, 128, 128), view("a", 0, 4, 128, 128),
               view("m", 0, 4, 16, 128, 0), fn="sub"),)
    out, tr = one_op(ops, {"a": (a, float16), "m": (m, float16)}, {"d": (512, float16)},
                     trace=True)
    np.testing.assert_array_equal(out["d"].reshape(4, 128), a - m[:, :1])
    ev = next(e for e in tr.events if e.op == "vec_binary")
    assert ("UB:m:0", 0, 128) in ev.reads  # 4 rows x 32 B, contiguous here


def test_block_broadcast_of_a_non_uniform_block_is_an_error() -> None:
    a, m = f16(4, 128), f16(4, 16)
    ops = (vop("vec_binary", view("d", 0, 4, 128, 128), view("a", 0, 4, 128, 128),
               view("m", 0, 4, 16, 128, 0), fn="sub"),)
    with pytest.raises(InternalCompilerError, match="block-broadcast"):
        one_op(ops, {"a": (a, float16), "m": (m, float16)}, {"d": (512, float16)})


def test_row_stride_zero_source_rereads_one_row() -> None:
    a, b = f32(1, 64), f32(3, 64)
    ops = (vop("vec_binary", view("d", 0, 3, 64, 64), view("a", 0, 3, 0, 64),
               view("b", 0, 3, 64, 64), fn="mul"),)
    out = one_op(ops, {"a": (a, float32), "b": (b, float32)}, {"d": (192, float32)})
    np.testing.assert_array_equal(out["d"].reshape(3, 64), a * b)


@pytest.mark.parametrize("fn,ref", [
    ("exp", np.exp), ("ln", np.log), ("sqrt", np.sqrt), ("rsqrt", lambda v: 1 / np.sqrt(v)),
    ("reciprocal", lambda v: 1 / v), ("abs", np.abs), ("relu", lambda v: np.maximum(v, 0)),
    ("copy", lambda v: v)])
def test_vec_unary(fn: str, ref) -> None:
    a = np.abs(f32(2, 64)) + 0.25 if fn in ("ln", "sqrt", "rsqrt") else f32(2, 64)
    ops = (vop("vec_unary", view("d", 0, 2, 64, 64), view("a", 0, 2, 64, 64), fn=fn),)
    out = one_op(ops, {"a": (a, float32)}, {"d": (128, float32)})
    # rsqrt/reciprocal carry the target's modelled error (tests/sim/test_precision.py)
    rtol = 1e-6 + ASCEND_910B.approx_rel_error.get((fn, "float32"), 0.0)
    np.testing.assert_allclose(out["d"].reshape(2, 64), ref(a), rtol=rtol)


def test_vec_unary_fp16_computes_in_fp16() -> None:
    a = f16(1, 128)
    ops = (vop("vec_unary", view("d", 0, 1, 128, 128), view("a", 0, 1, 128, 128), fn="exp"),)
    out = one_op(ops, {"a": (a, float16)}, {"d": (128, float16)})
    np.testing.assert_array_equal(out["d"], np.exp(a).ravel())


@pytest.mark.parametrize("fn,ref", [("adds", np.add), ("muls", np.multiply),
                                    ("maxs", np.maximum), ("mins", np.minimum)])
def test_vec_scalar_fp16(fn: str, ref) -> None:
    a = f16(2, 128)
    ops = (vop("vec_scalar", view("d", 0, 2, 128, 128), view("a", 0, 2, 128, 128), fn=fn,
               scalar=0.1),)
    out = one_op(ops, {"a": (a, float16)}, {"d": (256, float16)})
    np.testing.assert_array_equal(out["d"].reshape(2, 128), ref(a, np.float16(0.1)))


def test_vec_dup_and_int_wrapping() -> None:
    a = np.full((1, 128), 32767, dtype=np.int16)
    ops = (vop("vec_dup", view("one", 0, 1, 128, 128), value=1),
           vop("vec_binary", view("d", 0, 1, 128, 128), view("a", 0, 1, 128, 128),
               view("one", 0, 1, 128, 128), fn="add"),
           vop("vec_dup", view("f", 0, 2, 64, 64), value=3.5))
    out = one_op(ops, {"a": (a, int16), "one": (np.zeros((1, 128), np.int16), int16)},
                 {"d": (128, int16), "f": (128, float32)})
    assert (out["d"] == -32768).all()
    assert (out["f"] == 3.5).all()


def test_int32_mul_wraps() -> None:
    a = np.full((1, 64), 2**20, dtype=np.int32)
    ops = (vop("vec_binary", view("d", 0, 1, 64, 64), view("a", 0, 1, 64, 64),
               view("a", 0, 1, 64, 64), fn="mul"),)
    out = one_op(ops, {"a": (a, int32)}, {"d": (64, int32)})
    assert (out["d"] == 0).all()  # 2**40 wraps to 0 in int32


TIE = np.float32(1 + 2**-11)  # halfway between two float16 values
F16_CASES = np.array([1.0002, -1.0002, TIE, -TIE, 2.5, 70000.0, 8.0, 8.0, 8.0], np.float32)
ULP = np.float32(2**-10)


@pytest.mark.parametrize("mode,expect", [
    ("rint", [1, -1, 1, -1, 2.5, np.inf, 8, 8, 8]),
    ("none", [1, -1, 1, -1, 2.5, np.inf, 8, 8, 8]),
    ("floor", [1, -1 - ULP, 1, -1 - ULP, 2.5, 65504, 8, 8, 8]),
    ("ceil", [1 + ULP, -1, 1 + ULP, -1, 2.5, np.inf, 8, 8, 8]),
    ("trunc", [1, -1, 1, -1, 2.5, 65504, 8, 8, 8]),
    ("round", [1, -1, 1 + ULP, -1 - ULP, 2.5, np.inf, 8, 8, 8]),
])
def test_vec_cast_f32_to_f16_rounding(mode: str, expect: list[float]) -> None:
    a = np.zeros((1, 64), np.float32)
    a[0, :9] = F16_CASES
    ops = (vop("vec_cast", view("d", 0, 1, 64, 64), view("a", 0, 1, 64, 64), round=mode),)
    out = one_op(ops, {"a": (a, float32)}, {"d": (64, float16)})
    np.testing.assert_array_equal(out["d"][:9], np.array(expect, np.float32).astype(np.float16))


@pytest.mark.parametrize("mode,expect", [
    ("rint", [2, -2, 4, -4, 0]), ("trunc", [2, -2, 3, -3, 0]), ("floor", [2, -3, 3, -4, 0]),
    ("ceil", [3, -2, 4, -3, 1]), ("round", [3, -3, 4, -4, 1])])
def test_vec_cast_f32_to_int32_rounding(mode: str, expect: list[int]) -> None:
    a = np.zeros((1, 64), np.float32)
    a[0, :5] = [2.5, -2.5, 3.7, -3.7, 0.5]
    ops = (vop("vec_cast", view("d", 0, 1, 64, 64), view("a", 0, 1, 64, 64), round=mode),)
    out = one_op(ops, {"a": (a, float32)}, {"d": (64, int32)})
    assert out["d"][:5].tolist() == expect


def test_vec_cast_bf16_roundtrip_and_widening() -> None:
    a = f32(1, 64)
    ops = (vop("vec_cast", view("b", 0, 1, 64, 64), view("a", 0, 1, 64, 64), round="rint"),
           vop("vec_cast", view("c", 0, 1, 64, 64), view("b", 0, 1, 64, 64), round="none"))
    out = one_op(ops, {"a": (a, float32)}, {"b": (64, bfloat16), "c": (64, float32)})
    from ascendsched.dtypes import round_bf16
    np.testing.assert_array_equal(out["b"], round_bf16(a).ravel())
    np.testing.assert_array_equal(out["c"], round_bf16(a).ravel())
    # bf16 floor never rounds up
    ops = (vop("vec_cast", view("b", 0, 1, 64, 64), view("a", 0, 1, 64, 64), round="floor"),)
    assert (one_op(ops, {"a": (a, float32)}, {"b": (64, bfloat16)})["b"] <= a.ravel()).all()


@pytest.mark.parametrize("fn,ref", [("sum", np.sum), ("max", np.max), ("min", np.min)])
def test_vec_reduce(fn: str, ref) -> None:
    a = f32(8, 64)
    ops = (vop("vec_reduce", view("d", 0, 8, 1, 1), view("a", 0, 8, 64, 64), fn=fn),)
    out = one_op(ops, {"a": (a, float32)}, {"d": (8, float32)})
    # the hardware sums in a tree, numpy pairwise: fp32 rounding differs by up to ~n*eps of
    # sum|a| (a row that nearly cancels has a large relative error either way)
    atol = 64 * np.finfo(np.float32).eps * np.abs(a).sum(axis=1).max() if fn == "sum" else 0
    np.testing.assert_allclose(out["d"], ref(a, axis=1), rtol=1e-6, atol=atol)


def test_vec_brcb() -> None:
    a = f32(16, 1)
    ops = (Instr("vec_brcb", Pipe.V, (view("d", 0, 16, 8, 8),), (view("a", 0, 16, 1, 1),)),)
    out = one_op(ops, {"a": (a, float32)}, {"d": (128, float32)})
    np.testing.assert_array_equal(out["d"].reshape(16, 8), np.repeat(a, 8, axis=1))


def test_vec_brcb_in_place_is_rejected() -> None:
    # asc-devkit docs Brcb.md:122: the source must not share memory with the destination
    a = f32(16, 1)
    ops = (Instr("vec_brcb", Pipe.V, (view("a", 0, 16, 8, 8),), (view("a", 0, 16, 1, 1),)),)
    with pytest.raises(InternalCompilerError, match="brcb in place"):
        one_op(ops, {"a": (np.resize(a, 128).astype(np.float32), float32)}, {})


@pytest.mark.parametrize("fn,ok", [("sum", True), ("max", False), ("min", False)])
def test_vec_reduce_dst_alignment(fn: str, ok: bool) -> None:
    # WholeReduceSum dst on sizeof(T) (docs ReduceRepeat.md:171-172); Max/Min on 2 * sizeof(T)
    # (impl/basic_api/kernel_operator_vec_reduce_intf_impl.h:177)
    a = f32(8, 64)
    ops = (vop("vec_reduce", view("d", 1, 8, 1, 1), view("a", 0, 8, 64, 64), fn=fn),)
    if ok:
        out = one_op(ops, {"a": (a, float32)}, {"d": (16, float32)})
        np.testing.assert_allclose(out["d"][1:9], a.sum(axis=1), rtol=1e-5)
    else:
        with pytest.raises(InternalCompilerError, match="not 8-byte aligned"):
            one_op(ops, {"a": (a, float32)}, {"d": (16, float32)})


def test_vec_cmp_and_select() -> None:
    a, b = f32(2, 64), f32(2, 64)
    ops = (vop("vec_cmp", view("m", 0, 2, 8, 8), view("a", 0, 2, 64, 64),
               view("b", 0, 2, 64, 64), fn="lt"),
           Instr("vec_select", Pipe.V, (view("d", 0, 2, 64, 64),),
                 (view("m", 0, 2, 8, 8), view("a", 0, 2, 64, 64), view("b", 0, 2, 64, 64))))
    out = one_op(ops, {"a": (a, float32), "b": (b, float32)},
                 {"d": (128, float32), "m": (32, uint8)})
    np.testing.assert_array_equal(out["d"].reshape(2, 64), np.minimum(a, b))
    bits = np.packbits(a < b, axis=1, bitorder="little")
    np.testing.assert_array_equal(out["m"][:16].reshape(2, 8), bits)


# --------------------------------------------------------------------------- DMA
def test_dma_rows_not_multiple_of_32_bytes_keep_pad_bytes() -> None:
    x = f16(3, 8)  # GM rows of 8, we copy 5 columns (10 B) of each
    body = (
        vop("vec_dup", view("u", 0, 3, 16, 16), value=7),
        Instr("copy_gm_ub", Pipe.MTE2, (view("u", 0, 3, 16, 5),), (view("x", 0, 3, 8, 5),)),
        Instr("copy_ub_gm", Pipe.MTE3, (view("z", 0, 3, 16, 16),), (view("u", 0, 3, 16, 16),)),
    )
    k = kernel([("x", (3, 8), float16, "input"), ("z", (3, 16), float16, "output")],
               [("u", float16, 48)], body)
    r = run_kernel(k, {"x": x}, trace=True)
    z = r.outputs["z"]
    np.testing.assert_array_equal(z[:, :5], x[:, :5])
    assert (z[:, 5:] == 7).all()
    load = r.trace.events[1]
    assert load.reads == (("GM:x", 0, 10), ("GM:x", 16, 26), ("GM:x", 32, 42))  # GM exact
    assert load.writes == (("UB:u:0", 0, 96),)  # each 10 B row rounded out to 32 B


def test_dma_ub_row_stride_must_be_whole_blocks() -> None:
    body = (Instr("copy_gm_ub", Pipe.MTE2, (view("u", 0, 3, 8, 5),), (view("x", 0, 3, 8, 5),)),)
    k = kernel([("x", (3, 8), float16, "input")], [("u", float16, 48)], body)
    with pytest.raises(InternalCompilerError, match="row stride 16 B"):
        run_kernel(k, {"x": f16(3, 8)})


# --------------------------------------------------------------------------- constraint errors
def _err(ops: tuple[Instr, ...], match: str, dtype: DType = float32) -> None:
    a = np.ones((1, 512), dtype.np)
    with pytest.raises(InternalCompilerError, match=match):
        one_op(ops, {"a": (a, dtype)}, {"d": (512, dtype)})


def test_vector_constraint_errors_name_the_instruction() -> None:
    _err((vop("vec_unary", view("d", 0, 256, 0, 8), view("a", 0, 256, 0, 8), fn="abs"),),
         "exceed max_repeat")
    _err((vop("vec_unary", view("d", 0, 1, 128, 128), view("a", 0, 1, 128, 128), fn="abs"),),
         "exceed one 256 B repeat")
    _err((vop("vec_unary", view("d", 1, 1, 64, 64), view("a", 0, 1, 64, 64), fn="abs"),),
         r"vec_unary fn=abs.*\(alignment\): vector dst d starts at element offset 1 \(4 B "
         r"each\), not 32-byte aligned")
    _err((vop("vec_unary", view("d", 0, 2, 4, 4), view("a", 0, 2, 8, 4), fn="abs"),),
         "row stride 16 B is not a multiple of 32")
    _err((vop("vec_unary", view("d", 0, 2, 64, 64), view("a", 0, 2, 128, 64, 2), fn="abs"),),
         "column stride 2")
    _err((vop("vec_unary", view("d", 0, 2, 512, 64), view("a", 0, 2, 64, 64), fn="abs"),),
         "outside d")
    _err((vop("vec_unary", view("d", 0, 1, 64, 64), view("a", 0, 1, 64, 64), fn="cosh"),),
         "fn='cosh'")
    _err((vop("vec_binary", view("d", 0, 1, 64, 64), view("a", 0, 1, 64, 64),
              view("a", 0, 1, 64, 64), fn="add"),), "add on bfloat16 is not supported",
         bfloat16)
    _err((Instr("vec_frobnicate", Pipe.V, (view("d", 0, 1, 8, 8),), ()),),
         "unknown op 'vec_frobnicate'")
    _err((Instr("vec_unary", Pipe.MTE2, (view("d", 0, 1, 64, 64),), (view("a", 0, 1, 64, 64),),
                (("fn", "abs"),)),), "runs on pipe V")
