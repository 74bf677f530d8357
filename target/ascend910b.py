"""Atlas A2 / Ascend 910B (``__NPU_ARCH__`` 2201, dav-c220): the primary machine model.

Every number carries its source. Sources are the open AscendC package mirror
``mirror-cann/asc-devkit`` (include/, impl/, docs/zh/), ``hicann/catlass`` and
``tile-ai/tilelang-ascend``, as collected in shared/ASCEND_910B.md.
"""

from __future__ import annotations

from dataclasses import replace

from ascendsched.target.costs import DEFAULT_COSTS_910B
from ascendsched.target.model import CoreType, Pipe, Scope, ScopeSpec, Target

KB = 1024

_P = Pipe
# Valid HardEvent pairs, AscendC ``enum class HardEvent`` (asc-devkit include/.../kernel_event.h;
# ASCEND_910B.md "Synchronisation").
_AIV_EVENTS = frozenset(
    [
        (_P.MTE2, _P.V), (_P.V, _P.MTE2), (_P.MTE3, _P.V), (_P.V, _P.MTE3), (_P.V, _P.V),
        (_P.MTE3, _P.MTE2), (_P.MTE2, _P.MTE3), (_P.S, _P.V), (_P.V, _P.S), (_P.S, _P.MTE2),
        (_P.MTE2, _P.S), (_P.S, _P.MTE3), (_P.MTE3, _P.S),
    ]
)
_AIC_EVENTS = frozenset(
    [
        (_P.MTE2, _P.MTE1), (_P.MTE1, _P.MTE2), (_P.MTE1, _P.M), (_P.M, _P.MTE1),
        (_P.MTE3, _P.MTE1), (_P.MTE1, _P.MTE3), (_P.MTE2, _P.M), (_P.M, _P.MTE2),
        (_P.M, _P.FIX), (_P.FIX, _P.M), (_P.MTE3, _P.MTE2), (_P.MTE2, _P.MTE3),
        (_P.S, _P.MTE2), (_P.MTE2, _P.S), (_P.S, _P.MTE3), (_P.MTE3, _P.S), (_P.MTE2, _P.FIX),
        (_P.FIX, _P.MTE2), (_P.FIX, _P.S), (_P.M, _P.S), (_P.FIX, _P.MTE3),
        (_P.MTE1, _P.FIX), (_P.FIX, _P.MTE1), (_P.FIX, _P.FIX),
    ]
)

_F16, _F32, _BF16, _I32, _I16, _I8 = "float16", "float32", "bfloat16", "int32", "int16", "int8"
# Vector unit dtype support on 910B, from the per-API "支持的数据类型" tables of
# asc-devkit docs/zh (Add/Sub/Mul/Max/Min: half, float, int16, int32; Div/Exp/Ln/Sqrt/Rsqrt/
# Reciprocal: half, float; Abs/Relu: half, float (Relu also int32); Duplicate: all 16/32-bit;
# WholeReduceSum/Max/Min: half, float; Compare/Select: half, float). bfloat16 has no
# arithmetic on the 910B vector unit: it is only cast to/from float32.
_ARITH = frozenset([_F16, _F32, _I16, _I32])
_FLOAT = frozenset([_F16, _F32])
VECTOR_DTYPES = {
    "add": _ARITH, "sub": _ARITH, "mul": _ARITH, "max": _ARITH, "min": _ARITH,
    "div": _FLOAT, "exp": _FLOAT, "ln": _FLOAT, "sqrt": _FLOAT, "rsqrt": _FLOAT,
    "reciprocal": _FLOAT, "abs": _FLOAT, "relu": frozenset([_F16, _F32, _I32]),
    "adds": _ARITH, "muls": _ARITH, "maxs": _ARITH, "mins": _ARITH,
    "dup": frozenset([_F16, _F32, _I16, _I32, _BF16]),
    "copy": frozenset([_F16, _F32, _I16, _I32, _BF16]),
    "sum": _FLOAT, "rmax": _FLOAT, "rmin": _FLOAT,
    "cmp": _FLOAT, "select": _FLOAT, "brcb": frozenset([_F16, _F32, _I16, _I32]),
    # FusedMulAdd / MulAddDst with one dtype for dst and sources: half, float on Atlas A2
    # (docs 复合计算/FusedMulAdd.md 数据类型, MulAddDst.md 数据类型 table: half/half/half,
    # float/float/float; its half -> float row is a mixed form the selector does not use;
    # impl/basic_api/dav_c220/kernel_operator_vec_binary_impl.h static_asserts the same)
    "fused_mul_add": _FLOAT, "mul_add_dst": _FLOAT,
}
# ``Cast`` on 910B, exactly the documented table: (src, dst) -> the round modes it accepts
# (asc-devkit docs/zh/api/SIMD-API/基础API/Memory矢量计算/类型转换/Cast.md:215-247, "Atlas A2
# 训练系列产品/Atlas A2 推理系列产品支持的数据类型组合情况"; the same pairs and modes have
# CastIntrinsicsImpl overloads in impl/basic_api/dav_c220/kernel_operator_vec_vconv_impl.h).
# Mode names are the IR's (``none`` = CAST_NONE: CAST_RINT where the conversion loses
# precision, Cast.md RoundMode; ``odd`` = CAST_ODD). Not in the table, so not a Cast:
#   int16 -> int32 (no overload; the call does not compile against the real headers),
#   int32 -> float16: the table's row (Cast.md:235) is a dequantisation (vconv_deq,
#     vconv_impl.h:29-40), value = src * the SetDeqScale scale, roundMode ignored.
# Integer destinations saturate on overflow (docs 数据结构/precision_conversion.md:30; e.g.
# int32 -> int16 of 2^31 - 1 is 2^15 - 1, precision_conversion.md:411-415).
_DIRECTED = frozenset(["rint", "floor", "ceil", "round", "trunc"])
_NONE = frozenset(["none"])
VECTOR_CASTS: dict[tuple[str, str], frozenset[str]] = {
    ("int4", _F16): _NONE, (_I8, _F16): _NONE, ("uint8", _F16): _NONE,
    (_I16, _F16): _DIRECTED | _NONE, (_I16, _F32): _NONE,
    (_F16, "int4"): _DIRECTED | _NONE, (_F16, _I8): _DIRECTED | _NONE,
    (_F16, "uint8"): _DIRECTED | _NONE, (_F16, _I16): _DIRECTED, (_F16, _I32): _DIRECTED,
    (_F16, _F32): _NONE, (_BF16, _I32): _DIRECTED, (_BF16, _F32): _NONE,
    (_I32, _I16): _NONE, (_I32, _F32): _DIRECTED | _NONE, (_I32, "int64"): _NONE,
    (_F32, _I16): _DIRECTED, (_F32, _F16): _DIRECTED | {"odd"} | _NONE, (_F32, _BF16): _DIRECTED,
    (_F32, _I32): _DIRECTED, (_F32, _F32): _DIRECTED, (_F32, "int64"): _DIRECTED,
    ("int64", _I32): _NONE, ("int64", _F32): _DIRECTED,
}
# A cast the table lacks goes through intermediate dtypes, chosen so that the chain gives the
# value of one direct conversion (one rounding, then saturation for integer results):
#   int8 -> float32/int16/int32 via float16: int8 is exact in float16, float16 -> int of an
#     integer is exact; int8 -> bfloat16 via float16, float32 (both exact), then one rounding
#   int16 -> int32/bfloat16 via float32 (int16 is exact in float32)
#   int16 -> int8 via float16: |x| <= 2048 is exact in float16, larger values round to larger
#     integers and saturate to 127 / -128 as the direct cast would
#   int32 -> int8 via int16, float16 (saturating to int16 keeps the int8 saturation)
#   int32 -> float16 via float32: |x| < 2^24 is exact in float32, and every larger x is past
#     the float16 range either way (one rounding where the result is finite)
#   float16 <-> bfloat16 via float32 (exact widening, then one rounding)
#   bfloat16 -> int16 via float32 (exact widening, then the rounding to int16)
#   float32/bfloat16 -> int8 via int32 (the rounding), int16 (saturating), float16 (exact for
#     |x| <= 2048, beyond which int8 saturates anyway)
# int32 -> bfloat16 has no such chain (int32 -> float32 rounds for |x| > 2^24, then bfloat16
# rounds again): lowering rejects it.
CAST_CHAINS: dict[tuple[str, str], tuple[str, ...]] = {
    (_I8, _F32): (_F16,), (_I8, _I16): (_F16,), (_I8, _I32): (_F16,),
    (_I8, _BF16): (_F16, _F32), (_I16, _I32): (_F32,), (_I16, _BF16): (_F32,),
    (_I16, _I8): (_F16,), (_I32, _I8): (_I16, _F16), (_I32, _F16): (_F32,),
    (_F16, _BF16): (_F32,), (_BF16, _F16): (_F32,), (_BF16, _I16): (_F32,),
    (_F32, _I8): (_I32, _I16, _F16), (_BF16, _I8): (_I32, _I16, _F16),
}

# Documented value ranges of the integer parameters of the Cube calls, per IR op (asc-devkit docs
# Nd2Nz DataCopy, LoadData_2D, LoadDataWithTranspose, Mmad, Fixpipe; catlass copy_l0c_to_gm.hpp).
# A field not listed is fixed by the IR contract (sid, addrMode, ...).
_CUBE_PARAM_RANGES: dict[str, dict[str, tuple[int, int]]] = {
    "copy_gm_l1": {"ndNum": (1, 4095), "nValue": (1, 16384), "dValue": (1, 65535),
                   "srcNdMatrixStride": (0, 65535), "srcDValue": (1, 65535),
                   "dstNzC0Stride": (1, 16384), "dstNzNStride": (1, 16384),
                   "dstNzMatrixStride": (0, 16384)},
    "load_l0a": {"startIndex": (0, 0), "repeatTimes": (1, 255), "srcStride": (0, 65535),
                 "sid": (0, 0), "dstGap": (0, 65535), "addrMode": (0, 0)},
    "load_l0a_transpose": {"startIndex": (0, 0), "repeatTimes": (1, 255),
                           "srcStride": (0, 65535), "dstGap": (0, 65535),
                           "dstFracGap": (0, 65535), "addrMode": (0, 0)},
    "mmad": {"m": (1, 4095), "n": (1, 4095), "k": (1, 4095), "unitFlag": (0, 0)},
    "mmad_bias": {"m": (1, 4095), "n": (1, 4095), "k": (1, 4095), "unitFlag": (0, 0)},
    # L1 -> BiasTable DataCopyParams: one block of blockLen x 64 B (910B units), no gaps
    "copy_l1_bt": {"blockCount": (1, 1), "blockLen": (1, 16), "srcStride": (0, 0),
                   "dstStride": (0, 0)},
    "fixpipe": {"nSize": (1, 4095), "mSize": (1, 8192), "srcStride": (0, 65535),
                "dstStride": (1, 2**32 - 1), "unitFlag": (0, 0), "ndNum": (1, 65535),
                "srcNdStride": (0, 512), "dstNdStride": (0, 65535)},
    # DataCopy（GMToL1连续数据搬运）.md: count elements, count * eb a multiple of 32 B; the call
    # builds one DataCopyParams (impl/basic_api/kernel_operator_data_copy_intf_impl.h:826-834),
    # whose uint16 blockLen counts 32 B blocks: at most 65535 blocks (here of 8-byte words)
    "copy_gm_l1_cont": {"count": (1, 65535 * 32 // 8)},
}
_CUBE_PARAM_RANGES["fixpipe_quant"] = _CUBE_PARAM_RANGES["fixpipe"]
_CUBE_PARAM_RANGES["load_l0b"] = _CUBE_PARAM_RANGES["load_l0a"]
_CUBE_PARAM_RANGES["load_l0b_transpose"] = _CUBE_PARAM_RANGES["load_l0a_transpose"]

# Rsqrt and Reciprocal are approximations. asc-devkit docs Rsqrt.md:179, Reciprocal.md:202:
# half results do not meet 双千分之一 and float results do not meet 双万分之一 (use Div/Sqrt for
# precision); 双千分之一 = every error within 1/1000 of the true value except at most 1/1000
# of the results (Mmad.md:242), 双万分之一 the same with 1/10000. No bound is documented for the
# A2 (RsqrtConfig's ulp bounds are the 950's only, Rsqrt.md:131). Modelled: a relative error up
# to TWICE the missed criterion (2e-3 half, 2e-4 float), spread uniformly, so that about half
# of the results miss the criterion as documented. The factor 2 is our assumption, not a
# documented bound.
_APPROX_MISSED = {_F16: 1e-3, _F32: 1e-4}
APPROX_REL_ERROR = {(fn, dt): 2 * eps for fn in ("rsqrt", "reciprocal")
                    for dt, eps in _APPROX_MISSED.items()}

ASCEND_910B = Target(
    name="ascend910b",
    npu_arch="dav-c220",
    # 910B2: 24 AIC + 48 AIV (ASCEND_910B.md "910B per-core resources"; B3/B4 have 20 + 40).
    num_aic=24,
    num_aiv=48,
    aiv_per_aic=2,
    clock_hz=1.8e9,
    scopes=(
        # UB 192 KB per AIV; TPipe reserves 256 B and 8 KB by default -> 188160 B usable.
        ScopeSpec(Scope.UB, 192 * KB, 192 * KB - 256 - 8 * KB, 32, CoreType.AIV,
                  "asc-devkit docs/zh TPipe/TBuf, ASCEND_910B.md"),
        ScopeSpec(Scope.L1, 512 * KB, 512 * KB - 256, 32, CoreType.AIC, "ASCEND_910B.md"),
        ScopeSpec(Scope.L0A, 64 * KB, 64 * KB, 512, CoreType.AIC, "ASCEND_910B.md"),
        ScopeSpec(Scope.L0B, 64 * KB, 64 * KB, 512, CoreType.AIC, "ASCEND_910B.md"),
        # L0C alignment 64 B; an Mmad destination wants 1 KB, which the planner uses.
        ScopeSpec(Scope.L0C, 128 * KB, 128 * KB, 1024, CoreType.AIC, "ASCEND_910B.md"),
        # BiasTable 1 KB on 910B, starts 64 B aligned (asc-devkit docs 矩阵计算（ISASI）/
        # 矩阵计算的搬入/DataCopy（L1ToBiasTable-Buffer数据搬运）.md; Mmad.md: bias in C2).
        ScopeSpec(Scope.BT, 1 * KB, 1 * KB, 64, CoreType.AIC,
                  "asc-devkit docs DataCopy（L1ToBiasTable-Buffer数据搬运）.md"),
    ),
    block_bytes=32,  # DataCopy lengths/gaps and vector block strides are in 32 B blocks
    repeat_bytes=256,  # one vector repeat = 8 blocks = 256 B (128 fp16 / 64 fp32 lanes)
    max_repeat=255,  # repeatTimes is uint8_t in the level-0 vector APIs
    max_rep_stride=255,  # dstRepStride/srcRepStride are uint8_t (BinaryRepeatParams)
    # Event ids 0..7 exist; hand-placed flags should use 0..5: 6 is reserved, 7 is TPipe's auto
    # sync (asc-devkit docs SetFlag-WaitFlag(ISASI).md:78, 88). On the AIC the TPipe itself holds
    # M_MTE1 0, 1, 2 until Destroy (impl/basic_api/kernel_tpipe_impl.h:100-113): the emitter
    # destroys it before the first flag. No basic API the emitter calls places flags of its own
    # on dav-c220 (tests/emit_ascendc/test_event_ids.py lists the ones that do).
    event_ids=(0, 1, 2, 3, 4, 5),
    hard_events={CoreType.AIV: _AIV_EVENTS, CoreType.AIC: _AIC_EVENTS},
    # DESIGN.md "execution model": dependent V instructions and overlapping MTE2/MTE3 copies
    # need PipeBarrier<pipe>; where the sources are silent we are conservative (True). Mmads
    # need PipeBarrier<PIPE_M> only under mmad_ordered_fractals (below). For V the source is
    # explicit (mirror-cann/asc-devkit @82b89a15, docs/zh/api/SIMD-API/基础API/同步控制/核内同步/
    # PipeBarrier(ISASI).md, 调用示例): a Mul reading an Add's output "两个矢量运算指令产生依赖，
    # 需要插入PipeBarrier保证两条指令的执行顺序", and with cce-auto-sync the compiler inserts the
    # PIPE_V -> PIPE_V syncs itself (关键特性说明.md, 表3): the barrier is required, not caution.
    needs_same_pipe_barrier={
        _P.V: True, _P.MTE2: True, _P.MTE3: True, _P.MTE1: True, _P.M: True, _P.FIX: True,
        _P.S: False,
    },
    # ids 0..15; SyncAll owns 11..14 (docs CrossCoreSetFlag(ISASI).md:103, 133;
    # impl/basic_api/dav_c220/kernel_operator_sync_impl.h:117-120)
    cross_flag_ids=tuple(range(11)),
    cross_flag_max_pending=15,
    gm_bytes_per_s=1.6e12,  # HBM 1.6 TB/s (CATLASS docs assume 1.8)
    vector_dtypes=VECTOR_DTYPES,
    vector_casts=VECTOR_CASTS,
    cast_chains=CAST_CHAINS,
    # DataCopyParams.blockCount is 12 bits (asc-devkit include/basic_api/kernel_struct_data_copy.h);
    # Brcb takes 8 source elements per repeat (asc-devkit kernel_struct_brcb.h, docs Brcb.md).
    max_dma_block_count=4095,
    brcb_elems_per_repeat=8,
    # A fractal is 16 rows x 32 B = 512 B in L0A/L0B (LoadData_2D.md); L0C fractals are 16 x 16
    # (Mmad.md).
    cube_rows=16,
    cube_fractal_bytes=512,
    cube_param_ranges=_CUBE_PARAM_RANGES,
    # asc-devkit docs/zh/api/SIMD-API/基础API/矩阵计算（ISASI）/Mmad计算/Mmad.md, 同步优化说明:
    # accumulating along K, consecutive Mmads need PipeBarrier(PIPE_M) only while
    # (m / 16) * (n / 16) < 10; above, "硬件调度器能够自动处理写-读依赖问题" (the hardware
    # handles the write-read dependence). Matmul impl code says the same ("当前平台阈值为10*256").
    mmad_ordered_fractals=10,
    costs=DEFAULT_COSTS_910B,
    approx_rel_error=APPROX_REL_ERROR,
    sources={
        "primary": "mirror-cann/asc-devkit include/, impl/, docs/zh/",
        "summary": "shared/ASCEND_910B.md",
    },
)

DEFAULT_TARGET = ASCEND_910B

# Board variants of the published measurements (shared/calibration/SOURCES.md section 1): the
# 910B1 runs the AI cores at 1.85 GHz (ASC matmul sample README; the derived cube check); the
# 20-AIC A2 of the Matmul tiling case also runs at 1.85 GHz (its aic_total_cycles / aicore_time).
ASCEND_910B1 = replace(ASCEND_910B, name="ascend910b1", clock_hz=1.85e9,
                       sources={**ASCEND_910B.sources, "clock": "SOURCES.md section 1 (HW)"})
ASCEND_910B_20AIC = replace(ASCEND_910B, name="ascend910b-20aic", clock_hz=1.85e9, num_aic=20,
                            num_aiv=40,
                            sources={**ASCEND_910B.sources,
                                     "cores": "ASC Matmul tiling case: 20 AIC, 1.85 GHz (HW)"})
