"""The IR verifier (lower/verify.py): one bad kernel per rule, the exact error it gives; the
good kernels of the fixtures and of the pipeline pass."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from ascendsched.dtypes import bfloat16, float16, float32, int8, uint8
from ascendsched.errors import InternalCompilerError
from ascendsched.lower.ir import (
    UNNUMBERED,
    Affine,
    Buffer,
    Cond,
    Dim,
    For,
    If,
    Instr,
    Kernel,
    Program,
    Region,
    Stmt,
    StmtMutator,
    view,
)
from ascendsched.lower.sync_ir import Barrier, CrossSet, CrossWait, SetFlag, WaitFlag
from ascendsched.lower.verify import verify
from ascendsched.target import ASCEND_910B, CoreType, Pipe, Scope
from tests.kit.cube import CASES, gemm_kernel, mutate
from tests.kit.ir import planned, row_max_sub_kernel, vadd_kernel


def _raises(k: Kernel, text: str, *, planned_: bool = False) -> None:
    """``verify`` fails on ``k`` with exactly this message after the instruction's text."""
    with pytest.raises(InternalCompilerError) as e:
        verify(k, planned=planned_)
    msg = str(e.value)
    assert msg.endswith(text), msg


def _with_instr(k: Kernel, op: str, fn, nth: int = 0) -> Kernel:  # noqa: ANN001
    """``k`` with the ``nth`` ``op`` instruction replaced by ``fn(instr)`` (a tuple)."""
    seen = [0]

    class _M(StmtMutator):
        def visit_Instr(self, s: Instr) -> tuple[Stmt, ...]:
            if s.op != op:
                return (s,)
            seen[0] += 1
            return fn(s) if seen[0] - 1 == nth else (s,)

    prog = k.programs[0]
    out = k.replace_body(prog.core, _M().visit_body(prog.body))
    assert seen[0] > nth
    return out


def _vec(k: Kernel, **kw: object) -> Kernel:
    """vadd with its vec_binary's fields changed."""
    return _with_instr(k, "vec_binary", lambda s: (replace(s, **kw),))


def _dst(k: Kernel, region: Region) -> Kernel:
    return _vec(k, writes=(region,))


# --------------------------------------------------------------------------- good kernels
@pytest.mark.parametrize("make", [
    lambda: vadd_kernel(), lambda: vadd_kernel(copies=2, blocks=2, n=8192 * 2),
    lambda: row_max_sub_kernel(),
    lambda: gemm_kernel(CASES["fp16_kloop_db"]), lambda: gemm_kernel(CASES["int8_trans"]),
    lambda: planned(gemm_kernel(CASES["fp16_blocks"])),
])
def test_the_fixtures_keep_the_contract(make) -> None:  # noqa: ANN001
    k = make()
    assert verify(k) is k


# --------------------------------------------------------------------------- kernel rules
def test_kernel_name() -> None:
    _raises(replace(vadd_kernel(), name="v-add"),
            "kernel v-add breaks the IR contract (kernel name): 'v-add' is not a C identifier")


def test_buffer_core() -> None:
    k = vadd_kernel()
    k = replace(k, buffers=k.buffers + (Buffer("a_l1", Scope.L1, float16, 512),))
    _raises(k, "(buffer core): buffer a_l1 in L1 belongs to the AIC, which has no program")


def test_memory_plan() -> None:
    k = vadd_kernel()
    _raises(k, "(memory plan): no offsets for x_ub, y_ub, z_ub", planned_=True)
    half = replace(k, buffers=(replace(k.buffers[0], offsets=(0,)),) + k.buffers[1:])
    _raises(half, "(memory plan): no offsets for y_ub, z_ub while other buffers have theirs")
    bufs = tuple(replace(b, offsets=(16 + 4096 * n,)) for n, b in enumerate(k.buffers))
    _raises(replace(k, buffers=bufs), "(memory plan): buffer x_ub copy 0 at byte 16 (+4096 B) "
                                      "breaks UB alignment 32 / usable 188160 B")


# --------------------------------------------------------------------------- statements
def test_loop_variable() -> None:
    k = vadd_kernel()
    (loop,) = k.programs[0].body
    k = k.replace_body(CoreType.AIV, (replace(loop, body=(For("k", 1, loop.body),)),))
    _raises(k, "kernel vadd: loop `k` in the AIV program breaks the IR contract (loop "
               "variable): k is already bound here (block_idx, k)")


def test_variables() -> None:
    k = _dst(vadd_kernel(), view("z_ub", Affine.of("j"), 16, 128, 128))
    _raises(k, "(variables): j not bound here (bound: block_idx, k)")


def test_if_condition_variables() -> None:
    k = vadd_kernel()
    k = k.replace_body(CoreType.AIV, (If((Cond(Affine.of("q"), "<", 1),),
                                         k.programs[0].body),))
    _raises(k, "kernel vadd: `if q < 1` in the AIV program breaks the IR contract "
               "(variables): q not bound here")


def test_op_core_pipe_operands() -> None:
    k = vadd_kernel()
    _raises(_vec(k, op="vec_pow"), "(op): unknown op 'vec_pow' (ops: copy_gm_l1, copy_gm_l1_cont, "
                                   "copy_gm_ub, copy_l1_bt, copy_ub_gm, fixpipe, fixpipe_quant, "
                                   "load_l0a, load_l0a_transpose, "
                                   "load_l0b, load_l0b_transpose, mmad, mmad_bias, vec_binary, vec_block_reduce, vec_brcb, vec_cast, "
                                   "vec_cmp, vec_dup, vec_fma, vec_reduce, vec_scalar, vec_select, "
                                   "vec_unary)")
    _raises(_vec(k, pipe=Pipe.MTE2), "(pipe): vec_binary runs on pipe V, not MTE2")
    one = _with_instr(k, "vec_binary", lambda s: (replace(s, reads=s.reads[:1]),))
    _raises(one, "(operands): vec_binary takes 1 write and 2 read regions")
    vec = k.programs[0].body[0].body[2]
    aic = k.with_programs(k.programs + (Program(CoreType.AIC, (replace(vec, id=UNNUMBERED),)),))
    with pytest.raises(InternalCompilerError, match=re.escape(
            "in the AIC program breaks the IR contract (core): vec_binary runs on the AIV "
            "core, not in the AIC program")):
        verify(aic)


def test_sync_has_no_regions() -> None:
    with pytest.raises(InternalCompilerError, match="barrier takes no regions and no attrs"):
        Barrier(Pipe.V, writes=(view("z_ub", 0, 1, 128, 128),))


# --------------------------------------------------------------------------- regions
def test_tensor_copy_and_bounds() -> None:
    k = vadd_kernel(copies=2)
    _raises(_dst(k, view("w_ub", 0, 16, 128, 128)), "(tensor): unknown tensor 'w_ub'")
    _raises(_dst(k, view("z_ub", 0, 16, 128, 128, copy=Affine.of("k"))),
            "(copy): copy k of z_ub leaves 0..1")
    _raises(_dst(vadd_kernel(), view("z_ub", 0, 16, 128, 128, copy=1)),
            "(copy): copy index 1 on single-copy buffer z_ub")
    _raises(_dst(k, view("z_ub", 128, 16, 128, 128, copy=Affine.mod("k", 2))),
            "(bounds): z_ub[copy (k % 2)]@(128)[16:128, 128:1] reaches elements up to "
            "[128, 2175], outside z_ub (0..2047)")
    store = _with_instr(k, "copy_ub_gm", lambda s: (replace(s, writes=(
        view("x", 0, 1, 8192, 2048, copy=1),)),))
    _raises(store, "(copy): GM tensor x has no copies (copy 1)")


def test_bounds_under_a_guard_are_exact() -> None:
    # a fifth tile past the end of the tensors, guarded away: out of bounds by the loop range,
    # in bounds where the guard holds (the exact check)
    k = vadd_kernel()
    (loop,) = k.programs[0].body
    guarded = k.replace_body(CoreType.AIV, (replace(loop, extent=5, body=(
        If((Cond(Affine.of("k"), "<", 4),), loop.body),)),))
    assert verify(guarded) is guarded
    unguarded = k.replace_body(CoreType.AIV, (replace(loop, extent=5),))
    _raises(unguarded, "(bounds): x@(2048*block_idx + 2048*k)[1:8192, 2048:1] reaches "
                       "elements up to [0, 10239], outside x (0..8191)")


def test_dims() -> None:
    r = Region("z_ub", Affine(), (Dim(2, 1024), Dim(8, 128), Dim(128, 1)))
    _raises(_dst(vadd_kernel(), r), "(dims): dst z_ub@(0)[2:1024, 8:128, 128:1] has 3 dims; "
                                    "vec_binary takes 1-D or 2-D views")


# --------------------------------------------------------------------------- vector and DMA
def _rows15(s: Instr, off: Affine | int) -> tuple[Stmt, ...]:
    return (replace(s, writes=(view("z_ub", off, 15, 128, 128),), reads=(
        view("x_ub", 0, 15, 128, 128), view("y_ub", 0, 15, 128, 128))),)


def test_alignment() -> None:
    _raises(_with_instr(vadd_kernel(), "vec_binary", lambda s: _rows15(s, 8)),
            "(alignment): vector dst z_ub starts at element offset 8 (2 B each), not "
            "32-byte aligned")
    # 8 * k is in bounds and aligned where the guard k == 0 holds (the exact checks)
    guarded = _with_instr(vadd_kernel(), "vec_binary", lambda s: (If(
        (Cond(Affine.of("k"), "==", 0),), _rows15(s, Affine.of("k") * 8)),))
    assert verify(guarded) is guarded
    planned_k = vadd_kernel()
    bufs = tuple(replace(b, offsets=(4096 * n,)) for n, b in enumerate(planned_k.buffers))
    planned_k = replace(planned_k, buffers=bufs)
    assert verify(planned_k, planned=True) is planned_k


def test_strides_and_repeats() -> None:
    k = vadd_kernel()
    _raises(_dst(k, view("z_ub", 0, 16, 120, 120)),
            "(stride): dst z_ub row stride 240 B is not a multiple of 32 B")
    _raises(_dst(k, view("z_ub", 0, 2, 128, 64, 2)),
            "(stride): dst z_ub column stride 2: only 1 (or 0 = block broadcast, sources "
            "only) is allowed")
    big = replace(k, buffers=tuple(replace(b, elems=256 * 128) for b in k.buffers))
    _raises(_vec(big, writes=(view("z_ub", 0, 256, 128, 128),), reads=(
        view("x_ub", 0, 256, 128, 128), view("y_ub", 0, 256, 128, 128))),
        "(repeat): 256 rows (repeats) exceed max_repeat 255")
    _raises(_vec(k, writes=(view("z_ub", 0, 8, 256, 256),), reads=(
        view("x_ub", 0, 8, 256, 256), view("y_ub", 0, 8, 256, 256))),
        "(repeat): 256 lanes x 2 B exceed one 256 B repeat")
    _raises(_dst(k, view("z_ub", 0, 16, 16384, 128)),
            "(bounds): z_ub@(0)[16:16384, 128:1] reaches elements up to [0, 245887], outside "
            "z_ub (0..2047)")


def test_attrs_dtypes_and_shapes() -> None:
    k = vadd_kernel()
    _raises(_vec(k, attrs=(("fn", "pow"),)),
            "(attr): attr fn='pow'; vec_binary supports add, sub, mul, div, max, min")
    _raises(_dst(k, view("z_ub", 0, 8, 128, 128)),
            "(shape): operand views differ: [(8, 128), (16, 128), (16, 128)]")
    cast = _with_instr(k, "vec_binary", lambda s: (Instr(
        "vec_cast", Pipe.V, s.writes, s.reads[:1], (("round", "rint"),)),))
    _raises(cast, "(dtype): Cast float16 -> float16 is not supported by ascend910b")
    ints = replace(k, buffers=tuple(replace(b, dtype=int8) for b in k.buffers),
                   params=tuple(replace(t, dtype=int8) for t in k.params))
    _raises(_vec(ints, attrs=(("fn", "div"),), writes=(view("z_ub", 0, 8, 256, 256),), reads=(
        view("x_ub", 0, 8, 256, 256), view("y_ub", 0, 8, 256, 256))),
        "(dtype): div on int8 is not supported by the ascend910b vector unit (supported: "
        "float16, float32)")


def test_dma() -> None:
    k = vadd_kernel()
    _raises(_with_instr(k, "copy_gm_ub", lambda s: (replace(s, writes=(view("y", 0, 1, 2048,
                                                                              2048),)),)),
            "(scope): copy_gm_ub moves between GM and UB, not GM and GM")
    _raises(_with_instr(k, "copy_gm_ub", lambda s: (replace(s, writes=(view(
        "x_ub", 0, 1, 1024, 1024, 2),), reads=(view("x", 0, 1, 1024, 1024),)),)),
        "(stride): dst x_ub: DMA column stride must be 1, not 2")
    _raises(_with_instr(k, "copy_gm_ub", lambda s: (replace(s, writes=(view(
        "x_ub", 0, 2, 1000, 1000),), reads=(view("x", 0, 2, 1000, 1000),)),)),
        "(stride): UB x_ub row stride 2000 B is not a multiple of 32")
    _raises(_with_instr(k, "copy_gm_ub", lambda s: (replace(s, writes=(view(
        "x_ub", 0, 2, 0, 1000),), reads=(view("x", 0, 2, 1000, 1000),)),)),
        "(stride): rows overlap (2 x 2000 B, UB pitch 0 B, GM pitch 2000 B)")
    _raises(_with_instr(k, "copy_gm_ub", lambda s: (replace(s, writes=(view(
        "x_ub", 8, 1, 2032, 2032),), reads=(view("x", 0, 1, 2032, 2032),)),)),
        "(alignment): UB x_ub starts at element offset 8 (2 B each), not 32-byte aligned")


def test_reduce_and_brcb() -> None:
    k = row_max_sub_kernel()  # y = x - rowmax(x), float32[16, 64]
    k = replace(k, buffers=tuple(replace(b, elems=256) if b.name == "m_ub" else b
                                 for b in k.buffers))
    _raises(_with_instr(k, "vec_reduce", lambda s: (replace(s, writes=(
        view("m_ub", 1, 16, 1, 1),)),)),
        "(alignment): WholeReduce max dst m_ub starts at element offset 1 (4 B each), not "
        "8-byte aligned")
    _raises(_with_instr(k, "vec_brcb", lambda s: (replace(s, reads=(
        view("m_ub", 0, 16, 2, 1),)),)),
        "(shape): brcb needs a contiguous src (16, 1) and dst (16, 8) with row stride 8; got "
        "src (16, 1) stride 2, dst (16, 8) stride 8")
    _raises(_with_instr(k, "vec_brcb", lambda s: (replace(s, writes=(
        view("m_ub", 64, 16, 8, 8),), reads=(view("m_ub", 56, 16, 1, 1),)),)),
        "(overlap): brcb in place: dst m_ub may share bytes with src m_ub (Brcb does not "
        "support a source sharing memory with its destination)")


def _instrs(k: Kernel) -> list[Instr]:
    from ascendsched.lower.ir import iter_instrs

    return [i for p in k.programs for i, _ in iter_instrs(p.body)]


# --------------------------------------------------------------------------- sync
def _flag(op: str, src: Pipe, dst: Pipe, eid: int | Affine = 0) -> Instr:
    if op == "set_flag":
        return SetFlag(src, dst=dst, event_id=Affine.of(eid))
    return WaitFlag(dst, src=src, event_id=Affine.of(eid))


def test_sync_rules() -> None:
    def before_add(*syncs: Instr) -> Kernel:
        return _with_instr(vadd_kernel(), "vec_binary", lambda s: (*syncs, s))

    _raises(before_add(_flag("set_flag", Pipe.M, Pipe.V)),
            "(event): HardEvent M_V does not exist on the AIV")
    _raises(before_add(_flag("set_flag", Pipe.MTE2, Pipe.V, 7)),
            "(attr): event_id 7 may take values outside the target's 0, 1, 2, 3, 4, 5")
    _raises(before_add(_flag("wait_flag", Pipe.MTE2, Pipe.V, Affine.of("k") + 3)),
            "(attr): event_id k + 3 may take values outside the target's 0, 1, 2, 3, 4, 5")
    _raises(before_add(CrossSet(Pipe.V, flag_id=Affine(0), mode=1)),
            "(attr): cross-core mode 1: only mode 2 (one AIC with its AIVs) is modelled")
    _raises(before_add(CrossWait(Pipe.V, flag_id=Affine(11))),
            "(attr): flag_id 11 may take values outside the target's 0, 1, 2, 3, 4, 5, 6, 7, "
            "8, 9, 10")


def test_sync_fields_are_typed() -> None:
    """A sync's fields are checked when it is built (the verifier sees typed ones only)."""
    with pytest.raises(InternalCompilerError, match="set_flag: dst must be a Pipe, not 'V'"):
        SetFlag(Pipe.MTE2, dst="V")  # type: ignore[arg-type]
    with pytest.raises(InternalCompilerError, match="wait_flag: event_id must be an Affine"):
        WaitFlag(Pipe.V, src=Pipe.MTE2, event_id=0)  # type: ignore[arg-type]
    with pytest.raises(InternalCompilerError, match="cross_wait: flag_id must be an Affine"):
        CrossWait(Pipe.V, flag_id=3)  # type: ignore[arg-type]
    with pytest.raises(InternalCompilerError, match="barrier: role must be a SyncRole"):
        Barrier(Pipe.V, role="keep")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- cube
def test_cube_params_come_from_the_kernels_target() -> None:
    k = gemm_kernel(CASES["fp16_single"])
    _raises(mutate(k, "mmad", n=5000, keep_dims=True),
            "(params): mmad n=5000 outside the documented range [1, 4095]")
    ranges = {**ASCEND_910B.cube_param_ranges,
              "mmad": {**ASCEND_910B.cube_param_ranges["mmad"], "n": (1, 32)}}
    small = replace(k, target=replace(ASCEND_910B, cube_param_ranges=ranges))
    _raises(small, "(params): mmad n=47 outside the documented range [1, 32]")
    _raises(mutate(k, "mmad", m=1),
            "(params): Mmad with m == 1 switches the cube to GEMV mode (A read as ND, "
            "Mmad.md); pad m to 16 rows")
    _raises(_with_instr(k, "mmad", lambda s: (replace(s, attrs=s.attrs + (("reluEn", True),)),)),
            "(params): mmad attrs must be exactly m, n, k, unitFlag, kDirectionAlign, "
            "cmatrixSource, cmatrixInitVal; unknown ['reluEn']")


def test_cube_regions() -> None:
    k = gemm_kernel(CASES["fp16_single"])
    _raises(mutate(k, "load_l0a", repeatTimes=2, keep_dims=True),
            "(footprint): region a_l0@(1280*ma)[5:256, 256:1] does not match the params' "
            "footprint [2:256, 256:1] (build cube instructions with cube_ops.make_cube_instr)")
    roomy = replace(k, buffers=tuple(replace(b, elems=b.elems + 256) if b.name == "a_l0" else b
                                     for b in k.buffers))
    shifted = _with_instr(roomy, "mmad", lambda s: (replace(s, reads=(replace(
        s.reads[0], offset=Affine(16)),) + s.reads[1:]),))
    _raises(shifted, "(alignment): src0 a_l0 starts at element offset 16, not 512-byte "
                     "aligned in L0A")
    _raises(mutate(k, "copy_gm_l1", dstNzC0Stride=1),
            "(overlap): dst a_l1: the instruction writes some elements twice (overlapping "
            "destination; the hardware leaves the order undefined)")
    _raises(mutate(gemm_kernel(CASES["fp16_out_fp16"]), "fixpipe", quantPre="F322BF16"),
            "(dtype): quantPre=F322BF16 does not convert float32 -> float16")


def test_the_error_names_kernel_instruction_and_program() -> None:
    k = _dst(vadd_kernel(), view("z_ub", 8, 15, 128, 128))
    with pytest.raises(InternalCompilerError) as e:
        verify(k)
    assert str(e.value).startswith(
        "kernel vadd: `[V] vec_binary fn=add  z_ub@(8)[15:128, 128:1] <- x_ub@(0)[16:128, "
        "128:1], y_ub@(0)[16:128, 128:1]   # z = x + y` in the AIV program breaks the IR "
        "contract (alignment): vector dst z_ub starts at element offset 8 (2 B each), not "
        "32-byte aligned")



def test_exact_checks_on_a_large_domain() -> None:
    # more instances than are enumerated, a guard the intervals cannot use: isl decides
    k = vadd_kernel()
    (loop,) = k.programs[0].body
    guarded = k.replace_body(CoreType.AIV, (replace(loop, extent=70_000, body=(
        If((Cond(Affine.of("k").floordiv(4), "<", 1),), loop.body),)),))
    assert verify(guarded) is guarded
    _raises(k.replace_body(CoreType.AIV, (replace(loop, extent=70_000, body=(
        If((Cond(Affine.of("k").floordiv(5), "<", 1),), loop.body),)),)),
        "(bounds): x@(2048*block_idx + 2048*k)[1:8192, 2048:1] reaches elements up to "
        "[0, 143359999], outside x (0..8191)")


def test_compare_masks() -> None:
    k = vadd_kernel()
    k = replace(k, buffers=k.buffers + (Buffer("m_ub", Scope.UB, uint8, 256),))

    def cmp(mask: Region) -> Kernel:
        return _with_instr(k, "vec_binary", lambda s: (
            Instr("vec_cmp", Pipe.V, (mask,), s.reads, (("fn", "lt"),)), s))

    good = cmp(view("m_ub", 0, 16, 16, 16))
    assert verify(good) is good
    _raises(cmp(view("z_ub", 0, 16, 16, 16)), "(dtype): mask z_ub must be uint8, not float16")
    _raises(cmp(view("m_ub", 0, 16, 8, 16)), "(stride): mask rows overlap: row stride 8 B < "
                                             "16 B")
    _raises(cmp(view("m_ub", 0, 16, 16, 8)), "(shape): mask view (16, 8) cannot hold (16, "
                                             "128) bits")


def test_cube_dtypes() -> None:
    k = gemm_kernel(CASES["fp16_single"])
    half_c = replace(k, buffers=tuple(replace(b, dtype=float16) if b.name == "c_l0" else b
                                      for b in k.buffers))
    _raises(half_c, "(dtype): Mmad float16 x float16 -> float16 is not supported (float16 x "
                    "float16 -> float32, bfloat16 x bfloat16 -> float32, int8 x int8 -> int32)")
    bf_b = replace(k, buffers=tuple(replace(b, dtype=bfloat16) if b.name == "b_l0" else b
                                    for b in k.buffers))
    _raises(bf_b, "(dtype): load_l0b does not convert: float16 -> bfloat16")


def test_cube_geometry_comes_from_the_target() -> None:
    # the footprints (and so the regions make_cube_instr builds) follow the kernel's target,
    # not constants bound to the 910B when the module was imported
    from ascendsched.lower.cube_ops import cube_footprints, make_cube_instr

    mmad = dict(m=33, n=47, k=70, unitFlag=0, kDirectionAlign=False, cmatrixSource=False,
                cmatrixInitVal=True)
    dtypes = (float32, float16, float16)
    assert cube_footprints("mmad", mmad, dtypes, ASCEND_910B) == (
        (Dim(48 * 48, 1),), (Dim(48 * 80, 1),), (Dim(80 * 48, 1),))
    wide = replace(ASCEND_910B, cube_rows=32)
    assert cube_footprints("mmad", mmad, dtypes, wide) == (
        (Dim(64 * 64, 1),), (Dim(64 * 80, 1),), (Dim(80 * 64, 1),))
    ins = make_cube_instr("mmad", (("c", 0, 0, float32), ("a", 0, 0, float16),
                                   ("b", 0, 0, float16)), target=wide, **mmad)
    assert [r.dims for r in ins.writes + ins.reads] == [
        (Dim(64 * 64, 1),), (Dim(64 * 80, 1),), (Dim(80 * 64, 1),)]
