"""Cube (AIC) ops in the simulator: GEMM fixtures vs numpy, layout mutations, exact trace bytes,
constraint errors, and agreement of the trace with the polyhedral byte relations."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from ascendsched import dtypes as dt
from ascendsched.errors import InternalCompilerError
from ascendsched.lower.affine import Affine
from ascendsched.lower.cube_ops import make_cube_instr
from ascendsched.lower.ir import Buffer, Dim, GmTensor, Instr, Kernel, Program, Region
from ascendsched.sim.execute import run_kernel
from ascendsched.target import ASCEND_910B, CoreType, Pipe, Scope
from tests.kit.cube import (
    CASES,
    case,
    gemm_kernel,
    inputs,
    instrs,
    mutate,
    reference,
)
from tests.kit.ir import planned


def _run(k: Kernel, c, seed: int = 0, **kw):  # noqa: ANN001, ANN202
    ins = inputs(c, seed, **kw)
    return run_kernel(k, ins, trace=True), reference(c, ins)


def _equal(out: np.ndarray, ref: np.ndarray) -> bool:
    return np.array_equal(out.astype(np.float64), ref.astype(np.float64), equal_nan=False)


# --------------------------------------------------------------------------- numpy equality
@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("plan", [False, True], ids=["unplanned", "planned"])
def test_gemm_fixture_equals_numpy(name: str, plan: bool) -> None:
    c = CASES[name]
    k = gemm_kernel(c)
    res, ref = _run(planned(k) if plan else k, c)
    out = res.outputs["c"]
    assert out.dtype == c.out.np and out.shape == (c.m, c.n)
    assert _equal(out, ref), f"max diff {np.abs(out.astype(float) - ref.astype(float)).max()}"


@pytest.mark.parametrize("name", ["fp16_kloop_db", "bf16_out_bf16", "fp16_trans"])
def test_gemm_random_values_within_fp32_rounding(name: str) -> None:
    c = CASES[name]
    res, _ = _run(gemm_kernel(c), c, 3, small_ints=False)
    ins = inputs(c, 3, small_ints=False)
    a = ins["a"].T if c.trans_a else ins["a"]
    b = ins["b"].T if c.trans_b else ins["b"]
    exact = a.astype(np.float64) @ b.astype(np.float64)
    out = res.outputs["c"].astype(np.float64)
    # fp32 accumulation of <= 70 exact products, then the output cast (bf16: 2^-8 relative)
    rel = 2.0 ** -8 if c.out is dt.bfloat16 else 2.0 ** -10 if c.out is dt.float16 else 1e-5
    np.testing.assert_allclose(out, exact, rtol=rel, atol=rel * np.abs(exact).max())


def test_mmad_accumulates_in_fp32_not_fp16() -> None:
    # 2048 + 1 + 1 ... is exact in fp32 but would stall at 2048 in fp16 accumulation.
    c = replace(CASES["fp16_single"], k=64, tk=64, tk0=16, m=16, n=16, tm=16, tn=16)
    a = np.ones((16, 64), np.float16)
    a[:, 0] = 2048
    b = np.ones((64, 16), np.float16)
    out = run_kernel(gemm_kernel(c), {"a": a, "b": b}).outputs["c"]
    assert (out == 2048 + 63).all()


def test_fixpipe_casts_round_to_nearest_even() -> None:
    c = replace(CASES["fp16_single"], m=16, n=16, k=16, tm=16, tn=16, tk=16, tk0=16,
                out=dt.float16)
    a = np.zeros((16, 16), np.float16)
    b = np.zeros((16, 16), np.float16)
    a[0, 0], a[0, 1] = 1.0, 2.0 ** -11  # 1 + 2^-11 is a tie between 1 and 1 + 2^-10: even is 1
    a[1, 0], a[1, 1] = 1.0, 3 * 2.0 ** -11  # 1 + 3*2^-11 ties up to 1 + 2^-9
    b[0, :], b[1, :] = 1.0, 1.0
    out = run_kernel(gemm_kernel(c), {"a": a, "b": b}).outputs["c"]
    assert out[0, 0] == np.float16(1.0) and out[1, 0] == np.float16(1 + 2.0 ** -9)


def test_int8_wraps_to_int32() -> None:
    c = CASES["int8"]
    ins = inputs(c, 5)
    out = run_kernel(gemm_kernel(c), ins).outputs["c"]
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, ins["a"].astype(np.int64) @ ins["b"].astype(np.int64))


def test_fixpipe_relu() -> None:
    c = CASES["fp16_single"]
    k = mutate(gemm_kernel(c), "fixpipe", reluEn=True)
    res, ref = _run(k, c)
    assert _equal(res.outputs["c"], np.maximum(ref, 0)) and (ref < 0).any()


# --------------------------------------------------------------------------- layout mutations
@pytest.mark.parametrize("op,nth,change", [
    ("load_l0a", 0, {"srcStride": 2}),  # wrong fractal stride in the nz source
    ("load_l0b", 0, {"ifTranspose": False}),  # Zn needs each fractal transposed
    ("load_l0b", 0, {"srcStride": 4}),  # wrong stride between B fractals
    ("fixpipe", 0, {"srcStride": 32}),  # wrong L0C column-block stride
    ("copy_gm_l1", 0, {"dstNzNStride": 2, "dstNzC0Stride": 96, "nValue": 16}),
    ("mmad", 0, {"k": 64}),  # drops K columns 64..69
])
def test_wrong_layout_params_give_wrong_numbers(op: str, nth: int, change: dict) -> None:
    # either the numbers are wrong or Mmad reads bytes no copy loaded (an error, sim/cube.py)
    c = CASES["fp16_single"]
    k = gemm_kernel(c)
    if op == "copy_gm_l1":  # room for a sparser L1 layout
        k = replace(k, buffers=tuple(replace(b, elems=b.elems * 2) if b.name == "a_l1" else b
                                     for b in k.buffers))
    try:
        res, ref = _run(mutate(k, op, nth, **change), c)
    except InternalCompilerError as e:
        assert "which no copy loaded" in str(e)
        return
    assert not _equal(res.outputs["c"], ref)


def test_int8_transposed_load_mutations_give_wrong_numbers() -> None:
    c = CASES["int8"]
    res, ref = _run(gemm_kernel(c), c)
    assert _equal(res.outputs["c"], ref)
    for change in ({"dstGap": 2}, {"srcStride": 1}):
        k = gemm_kernel(c)
        k = replace(k, buffers=tuple(replace(b, elems=b.elems * 2) if b.name == "b_l0" else b
                                     for b in k.buffers))
        try:  # wrong numbers, or Mmad reads L0B bytes the broken load never wrote
            res, ref = _run(mutate(k, "load_l0b_transpose", **change), c)
        except InternalCompilerError as e:
            assert "which no copy loaded" in str(e), change
            continue
        assert not _equal(res.outputs["c"], ref), change


def test_k_padding_is_never_loaded_unless_mmad_k_is_exact() -> None:
    # B's rows 70..79 in L1 were never written: Mmad with k = Kp = 80 would read them.
    c = CASES["fp16_single"]
    with pytest.raises(InternalCompilerError, match=r"reads b_l0 \(L0B\) k 70, column 0, "
                                                     r"which no copy loaded"):
        _run(mutate(gemm_kernel(c), "mmad", k=80), c)


def test_mmad_over_never_loaded_m_padding_is_an_error() -> None:
    # A's rows 33..47 were never loaded (Nd2Nz writes 33 rows): with m = 48 Mmad would read
    # them, garbage that may be NaN (asc-devkit docs Mmad.md:329, "应避免NaN输入"). With the
    # valid m = 33 (Mmad.md:285-287: the rest of the fractal is ignored) the numbers are exact.
    c = CASES["fp16_single"]
    res, ref = _run(gemm_kernel(c), c)
    assert not np.isnan(res.outputs["c"]).any() and _equal(res.outputs["c"], ref)
    with pytest.raises(InternalCompilerError, match=r"reads a_l0 \(L0A\) row 33, k 0, which "
                                                     r"no copy loaded"):
        _run(mutate(gemm_kernel(c), "mmad", m=48), c)


# --------------------------------------------------------------------------- exact trace bytes
def test_trace_bytes_are_exact() -> None:
    c = CASES["fp16_single"]  # 33 x 47 x 70, one tile, Mp 48, Kp 80, Np 48
    res, _ = _run(planned(gemm_kernel(c)), c)
    k = planned(gemm_kernel(c))
    off = {b.name: b.offsets[0] for b in k.buffers}
    ev = {e.op + str(i): e for i, e in enumerate(res.trace.events)}
    by_op: dict[str, list] = {}
    for e in res.trace.events:
        by_op.setdefault(e.op, []).append(e)
    a_copy = by_op["copy_gm_l1"][0]
    assert a_copy.reads == (("GM:a", 0, 33 * 70 * 2),)
    # 5 column groups of 32 B rows; rows 33..47 of each group are not written
    a1 = off["a_l1"]
    assert a_copy.writes == tuple(("L1", a1 + g * 48 * 32, a1 + g * 48 * 32 + 33 * 32)
                                  for g in range(5))
    mm = by_op["mmad"][0]
    assert mm.writes == (("L0C", off["c_l0"], off["c_l0"] + 48 * 48 * 4),)
    assert set(mm.reads) == {("L0A", off["a_l0"], off["a_l0"] + 48 * 80 * 2),
                             ("L0B", off["b_l0"], off["b_l0"] + 80 * 48 * 2)}
    fx = by_op["fixpipe"][0]
    assert fx.writes == (("GM:c", 0, 33 * 47 * 4),)
    c0 = off["c_l0"]
    assert fx.reads == tuple(("L0C", c0 + nb * 48 * 64, c0 + nb * 48 * 64 + 33 * 64)
                             for nb in range(3))
    loads = by_op["load_l0a"]
    assert [e.writes for e in loads] == [(("L0A", off["a_l0"] + ma * 5 * 512,
                                           off["a_l0"] + (ma + 1) * 5 * 512),)
                                         for ma in range(3)]
    assert len(ev) == len(res.trace.events)


def test_accumulating_mmad_reads_c() -> None:
    c = CASES["fp16_kloop_db"]
    res, _ = _run(gemm_kernel(c), c)
    mm = [e for e in res.trace.events if e.op == "mmad"]
    assert len(mm) == 10  # K tiles 4 x 16 | 4 x 16 | 16, 6
    assert not any(iv[0].startswith("L0C") for iv in mm[0].reads)
    assert all(any(iv[0].startswith("L0C") for iv in e.reads) for e in mm[1:])


def test_trace_matches_polyhedral_relations() -> None:
    isl = pytest.importorskip("islpy")
    from ascendsched.lower.byte_access import instr_accesses
    from ascendsched.lower.instances import kernel_instrs

    for name in ("fp16_kloop_db", "int8", "fp16_trans"):
        c = CASES[name]
        k = planned(gemm_kernel(c))
        res, _ = _run(k, c)
        infos = kernel_instrs(k)
        # dynamic instances in program order = schedule order (no syncs in this kernel)
        points = []
        for info in infos:
            names = ["block_idx", *info.loop_vars]

            def add(p, info=info, names=names, points=points):  # noqa: ANN001, ANN202
                vals = tuple(p.get_coordinate_val(isl.dim_type.set, j).to_python()
                             for j in range(len(names)))
                env = dict(zip(names, vals, strict=True))
                sched = info.schedule.intersect_domain(isl.Set.from_point(p)).range()
                sp = sched.sample_point()
                key = tuple(sp.get_coordinate_val(isl.dim_type.set, j).to_python()
                            for j in range(sched.dim(isl.dim_type.set)))
                points.append((env["block_idx"], key, info, p))

            info.domain.foreach_point(add)
        points.sort(key=lambda x: (x[0], x[1]))
        # ir.program_epilogue's barrier ALL ends each AIC program; it has no polyhedral instance
        events = sorted((e for e in res.trace.events if e.op != "barrier"),
                        key=lambda e: (e.block, e.seq))
        assert len(points) == len(events)
        for (_, _, info, p), e in zip(points, events, strict=True):
            assert e.op == info.instr.op
            for acc in instr_accesses(k, info):
                got = acc.relation.intersect_domain(isl.Set.from_point(p)).range()
                ivs = e.writes if acc.kind == "W" else e.reads
                space = acc.space
                want_ivs = [(lo, hi) for s, lo, hi in ivs
                            if s == space or s == f"GM:{space}"]
                want = " or ".join(f"{lo} <= b < {hi}" for lo, hi in want_ivs) or "false"
                tname = got.get_tuple_name()
                want_set = isl.Set(f"{{ {tname}[b] : {want} }}")
                assert got.is_equal(want_set), (name, str(info.instr), acc.kind, space)


# --------------------------------------------------------------------------- errors
def _aic(instr_list: tuple, bufs: tuple, params: tuple = ()) -> Kernel:
    return Kernel.build("t", params, bufs, 1, (Program(CoreType.AIC, instr_list),), ASCEND_910B)


def _small() -> tuple[tuple, tuple]:
    bufs = (Buffer("a_l1", Scope.L1, dt.float16, 4096), Buffer("a_l0", Scope.L0A, dt.float16, 4096),
            Buffer("b_l0", Scope.L0B, dt.float16, 4096),
            Buffer("c_l0", Scope.L0C, dt.float32, 4096))
    params = (GmTensor("a", (64, 64), dt.float16), GmTensor("c", (64, 64), dt.float32, "output"))
    return bufs, params


def _mmad(**kw: object) -> Instr:
    p = dict(m=16, n=16, k=16, unitFlag=0, kDirectionAlign=False, cmatrixSource=False,
             cmatrixInitVal=True)
    p.update(kw)
    return make_cube_instr("mmad", (("c_l0", 0, 0, dt.float32), ("a_l0", 0, 0, dt.float16),
                                    ("b_l0", 0, 0, dt.float16)), **p)


def _load(op: str = "load_l0a", dst_off: int = 0, **kw: object) -> Instr:
    p = dict(startIndex=0, repeatTimes=1, srcStride=1, sid=0, dstGap=0, ifTranspose=False,
             addrMode=0)
    p.update(kw)
    dst = "a_l0" if op == "load_l0a" else "b_l0"
    return make_cube_instr(op, ((dst, dst_off, 0, dt.float16), ("a_l1", 0, 0, dt.float16)), **p)


def _raises(instr: Instr, match: str) -> None:
    bufs, params = _small()
    with pytest.raises(InternalCompilerError, match=match):
        run_kernel(_aic((instr,), bufs, params), {"a": np.zeros((64, 64), np.float16)})


def test_gemv_mode_is_an_error() -> None:
    _raises(_mmad(m=1), "GEMV")


def test_mmad_size_limit() -> None:
    _raises(_mmad(k=4096), r"\(params\): mmad k=4096 outside the documented range \[1, 4095\]")
    good = _mmad()
    bad = replace(good, attrs=tuple((n, 5000 if n == "n" else v) for n, v in good.attrs))
    _raises(bad, r"n=5000 outside the documented range \[1, 4095\]")


def test_repeat_limit() -> None:
    good = _load()
    bad = replace(good, attrs=tuple((n, 256 if n == "repeatTimes" else v)
                                    for n, v in good.attrs))
    _raises(bad, "repeatTimes=256")


def test_misaligned_l0_address() -> None:
    _raises(_load(dst_off=16), "not 512-byte aligned")


def test_out_of_bounds() -> None:
    _raises(_load(repeatTimes=17), r"reaches elements up to \[0, 4351\], outside a_l0 \(0..4095\)")


def test_region_must_match_params() -> None:
    good = _load(repeatTimes=2)
    w = good.writes[0]
    bad = replace(good, writes=(Region(w.tensor, w.offset, (Dim(1, 256), Dim(256, 1)), w.copy),))
    _raises(bad, "does not match the params' footprint")


def test_wrong_scope_and_dtype() -> None:
    i = _load()
    bad = replace(i, writes=(replace(i.writes[0], tensor="b_l0"),))
    _raises(bad, "is in L0B; load_l0a needs L0A")
    bufs, params = _small()
    bufs = bufs[:2] + (Buffer("b_l0", Scope.L0B, dt.bfloat16, 4096),) + bufs[3:]
    mm = make_cube_instr("mmad", (("c_l0", 0, 0, dt.float32), ("a_l0", 0, 0, dt.float16),
                                  ("b_l0", 0, 0, dt.bfloat16)), m=16, n=16, k=16, unitFlag=0,
                         kDirectionAlign=False, cmatrixSource=False, cmatrixInitVal=True)
    with pytest.raises(InternalCompilerError, match="float16 x bfloat16"):
        run_kernel(_aic((mm,), bufs, params), {"a": np.zeros((64, 64), np.float16)})


def test_transpose_only_for_16_bit() -> None:
    bufs = (Buffer("a_l1", Scope.L1, dt.int8, 4096), Buffer("a_l0", Scope.L0A, dt.int8, 4096))
    ld = make_cube_instr("load_l0a", (("a_l0", 0, 0, dt.int8), ("a_l1", 0, 0, dt.int8)),
                         startIndex=0, repeatTimes=1, srcStride=1, sid=0, dstGap=0,
                         ifTranspose=True, addrMode=0)
    with pytest.raises(InternalCompilerError, match="16-bit types only"):
        run_kernel(_aic((ld,), bufs), {})


def test_overlapping_writes() -> None:
    bufs, params = _small()
    cp = make_cube_instr("copy_gm_l1", (("a_l1", 0, 0, dt.float16), ("a", 0, 0, dt.float16)),
                         ndNum=1, nValue=32, dValue=32, srcNdMatrixStride=0, srcDValue=64,
                         dstNzC0Stride=16, dstNzNStride=1, dstNzMatrixStride=0)
    with pytest.raises(InternalCompilerError, match="writes some elements twice"):
        run_kernel(_aic((cp,), bufs, params), {"a": np.zeros((64, 64), np.float16)})


def test_cube_op_in_aiv_program() -> None:
    bufs, params = _small()
    k = Kernel.build("t", params, bufs, 1, (Program(CoreType.AIV, (_load(),)),), ASCEND_910B)
    with pytest.raises(InternalCompilerError, match=r"buffer a_l1 in L1 belongs to the AIC, which "
                       r"has no program"):
        run_kernel(k, {"a": np.zeros((64, 64), np.float16)})


def test_fixpipe_quant_must_match_dtypes() -> None:
    bufs, params = _small()
    fx = make_cube_instr("fixpipe", (("c", 0, 0, dt.float32), ("c_l0", 0, 0, dt.float32)),
                         nSize=16, mSize=16, srcStride=16, dstStride=64, quantPre="F322F16",
                         reluEn=False, unitFlag=0, ndNum=1, srcNdStride=0, dstNdStride=0)
    cp = make_cube_instr("copy_gm_l1", (("a_l1", 0, 0, dt.float16), ("a", 0, 0, dt.float16)),
                         ndNum=1, nValue=16, dValue=16, srcNdMatrixStride=0, srcDValue=64,
                         dstNzC0Stride=16, dstNzNStride=1, dstNzMatrixStride=0)
    body = (cp, _load(), _load("load_l0b"), _mmad(), fx)  # Mmad reads loaded L0A/L0B only
    with pytest.raises(InternalCompilerError, match="does not convert float32 -> float32"):
        run_kernel(_aic(body, bufs, params), {"a": np.zeros((64, 64), np.float16)})


def test_make_cube_instr_checks_params() -> None:
    with pytest.raises(InternalCompilerError, match="missing"):
        make_cube_instr("mmad", (("c", 0, 0, dt.float32), ("a", 0, 0, dt.float16),
                                 ("b", 0, 0, dt.float16)), m=16, n=16, k=16)
    assert _load().pipe == Pipe.MTE1 and _mmad().pipe == Pipe.M
    assert [i.op for i in instrs(gemm_kernel(case("fp16_single")))].count("mmad") == 1
    assert Affine.of(3).const == 3


def test_batched_nd_num_copies_and_fixpipe() -> None:
    from tests.kit.cube import batched_kernel

    rng = np.random.default_rng(1)
    a = rng.integers(-4, 5, (3, 20, 40)).astype(np.float16)
    b = rng.integers(-4, 5, (3, 40, 24)).astype(np.float16)
    for k in (batched_kernel(), planned(batched_kernel(copies=1))):
        res = run_kernel(k, {"a": a, "b": b}, trace=True)
        np.testing.assert_array_equal(res.outputs["c"],
                                      np.matmul(a.astype(np.float32), b.astype(np.float32)))
    fx = [e for e in res.trace.events if e.op == "fixpipe"][0]
    assert fx.writes == (("GM:c", 0, 3 * 20 * 24 * 4),)
    assert len(fx.reads) == 3 * 2  # 2 column blocks of 16 per batch matrix


def test_load_with_transpose_b16_equals_if_transpose() -> None:
    # A^T fp16: LoadDataWithTranspose (one 16x16 square per repeat) == LoadData + ifTranspose
    from ascendsched.lower.ir import StmtMutator

    c = CASES["fp16_trans"]
    k = gemm_kernel(c)

    class _Swap(StmtMutator):
        def visit_Instr(self, s: Instr) -> tuple:
            if s.op != "load_l0a":
                return (s,)
            p = dict(s.attrs)
            ops = tuple((r.tensor, r.offset, r.copy, k.dtype_of(r.tensor))
                        for r in s.writes + s.reads)
            return (make_cube_instr("load_l0a_transpose", ops, startIndex=0,
                                    repeatTimes=p["repeatTimes"], srcStride=p["srcStride"],
                                    dstGap=0, dstFracGap=0, addrMode=0),)

    swapped = k.replace_body(CoreType.AIC, _Swap().visit_body(k.programs[0].body))
    assert "load_l0a_transpose" in {i.op for i in instrs(swapped)}
    res, ref = _run(swapped, c)
    assert _equal(res.outputs["c"], ref)


def test_forgetting_the_l0c_init_gives_garbage() -> None:
    # cmatrixInitVal False on the first K step accumulates onto never-written (poison) L0C
    c = CASES["fp16_single"]
    res, _ = _run(mutate(gemm_kernel(c), "mmad", cmatrixInitVal=False), c)
    assert np.isnan(res.outputs["c"]).all()
