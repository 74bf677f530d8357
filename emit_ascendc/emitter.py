"""Kernel IR -> AscendC C++ project: kernel, tiling struct, ACL host launcher, CMake, CPU driver.

The emitter decides nothing the IR did not decide: each ``Instr`` becomes one AscendC call
(``_OP_TABLE``), loops and ifs become C ``for``/``if``, and every hardware number comes from
``kernel.target``. Input is a *final* kernel: memory planned (every UB ``Buffer`` has
``offsets``) and synchronised (``set_flag``/``wait_flag``/``barrier`` instructions present).

API units, verified against the AscendC sources (mirror-cann/asc-devkit):
  DataCopyParams{blockCount, blockLen, srcStride, dstStride}: lengths and gaps in 32 B blocks
      (include/basic_api/kernel_struct_data_copy.h, impl/basic_api/dav_c220/kernel_operator_data_copy_impl.h)
  DataCopyExtParams{blockCount, blockLen, srcStride, dstStride, rsv}: blockLen in bytes, gaps in
      bytes on the GM side and 32 B blocks on the UB side; each UB row takes ceil(blockLen/32)
      blocks (docs DataCopyPad(ISASI))
  Binary/UnaryRepeatParams: block strides and repeat strides in 32 B blocks
      (include/basic_api/kernel_struct_binary.h, kernel_struct_unary.h)
  WholeReduce*: dstRepStride in units of one result (sizeof(T) for ORDER_ONLY_VALUE)
      (docs WholeReduceMax; include/basic_api/kernel_operator_vec_reduce_intf.h)
  Compare (910B): mask ignored, bits packed 256/sizeof(T) per repeat; Select
      VSEL_TENSOR_TENSOR_MODE consumes selMask contiguously, 256/sizeof(T) bits per repeat
      (docs Compare/Select; impl/basic_api/dav_c220/kernel_operator_vec_cmp_impl.h)

Cube (AIC) programs (lower/ir.py "Cube (AIC)"): each cube op's attrs ARE the fields of its
AscendC parameter struct, so the printer passes them through in constructor order:
  Nd2NzParams(ndNum, nValue, dValue, srcNdMatrixStride, srcDValue, dstNzC0Stride, dstNzNStride,
      dstNzMatrixStride)  include/basic_api/kernel_struct_data_copy.h
  LoadData2DParams(startIndex, repeatTimes, srcStride, sid, dstGap, ifTranspose, addrMode),
  LoadData2dTransposeParams(startIndex, repeatTimes, srcStride, dstGap, dstFracGap, addrMode),
  MmadParams(m, n, k, unitFlag, cmatrixSource, cmatrixInitVal) (+ .kDirectionAlign)
      include/basic_api/kernel_struct_mm.h
  FixpipeParamsV220(nSize, mSize, srcStride, dstStride, reluEn, quantPre, deqScalar, ndNum,
      srcNdStride, dstNdStride, unitFlag)  include/basic_api/kernel_struct_fixpipe.h
Kernel type: KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIC_ONLY / _AIV_ONLY / _MIX_AIC_1_1) (docs
"设置Kernel类型", hiascend atlasascendc_api_07_0218); each core's code sits in
``if ASCEND_IS_AIC { ... }`` / ``if ASCEND_IS_AIV { ... }`` (impl/utils/sys_macros.h: constexpr
per core, from __DAV_C220_CUBE__ / __DAV_C220_VEC__). A mix kernel is 1 AIC : 1 AIV, the
pairing the IR and sim model (one AIV per block). One TBuf per physical scope: TPosition A1 = L1
(A1 and B1 are the same memory), A2 = L0A, B2 = L0B, CO1 = L0C (include/basic_api/kernel_tpipe.h).
"""

from __future__ import annotations

import math
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from string import Template

from ascendsched.dtypes import DType
from ascendsched.emit_ascendc.cce_names import CCE_BUILTINS, CPP_KEYWORDS
from ascendsched.errors import InternalCompilerError, UnsupportedError
from ascendsched.lower.ir import (
    BLOCK_IDX,
    CUBE_OPS,
    Affine,
    Buffer,
    Cond,
    For,
    GmTensor,
    If,
    Instr,
    Kernel,
    Region,
    Stmt,
    cube_footprints,
    cube_params,
    iter_instrs,
    program_epilogue,
    squeeze_dims,
)
from ascendsched.target.model import CoreType, Pipe, Scope, Target

RUNTIME_DIR = Path(__file__).parent / "runtime"
TEMPLATE_DIR = Path(__file__).parent / "templates"

_C_TYPES = {
    "float16": "half", "float32": "float", "bfloat16": "bfloat16_t", "int8": "int8_t",
    "int16": "int16_t", "int32": "int32_t", "uint8": "uint8_t",
}
# CANN SOC_VERSION used as the CMake default, per target (a build setting, not a model number).
_SOC_VERSION = {"ascend910b": "Ascend910B2"}
_GM_WORKSPACE_ALIGN = 512  # bytes between workspace tensors (best DMA alignment, ASCEND_910B.md)


@dataclass(frozen=True)
class EmittedProject:
    """Files of one emitted kernel project and the kernel source text."""

    name: str
    out_dir: Path
    kernel_cpp: Path
    tiling_h: Path
    host_main: Path
    cmake: Path
    readme: Path
    cpu_main: Path
    kernel_source: str
    runtime_dir: Path
    cpu_defines: tuple[str, ...]  # -D flags for the CPU build, from kernel.target


def emit_project(kernel: Kernel, out_dir: Path, *, tiling: dict | None = None) -> EmittedProject:
    """Write the AscendC project for ``kernel`` into ``out_dir`` and return its file paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    _check_kernel(kernel)
    name = kernel.name
    tiling_fields = _tiling_fields(kernel, tiling or {})
    source = _KernelPrinter(kernel).print()
    files = {
        "kernel_cpp": (f"{name}_kernel.cpp", source),
        "tiling_h": (f"{name}_tiling.h", _tiling_header(kernel, tiling_fields)),
        "host_main": ("main.cpp", _render("main.cpp.in", _host_vars(kernel, tiling_fields))),
        "cmake": ("CMakeLists.txt", _render("CMakeLists.txt.in", _cmake_vars(kernel))),
        "readme": ("README.md", _render("README.md.in", _cmake_vars(kernel))),
        "cpu_main": ("cpu_main.cpp", _cpu_main(kernel, tiling_fields)),
    }
    paths = {}
    for key, (fname, text) in files.items():
        path = out_dir / fname
        if not path.exists() or path.read_text() != text:  # keep mtimes for build caching
            path.write_text(text)
        paths[key] = path
    return EmittedProject(name=name, out_dir=out_dir, kernel_source=source, runtime_dir=RUNTIME_DIR,
                          cpu_defines=_cpu_defines(kernel.target), **paths)


def c_name(kernel_name: str) -> str:
    """The C name of the emitted kernel function: ``kernel_name``, or ``<name>_kernel`` when the
    name would clash with a CCE builtin of the global namespace (``vadd``: the intrinsic the
    910B ``Add`` is built on, emit_ascendc/cce_names.py) or a C++ keyword. The project's file
    names keep the kernel name; the launcher and the CPU driver call the C name."""
    name = kernel_name
    while name in CCE_BUILTINS or name in CPP_KEYWORDS:
        name += "_kernel"
    return name


# --------------------------------------------------------------------------- checks
def _uses_ffts(k: Kernel) -> bool:
    """Cross-core flags need the FFTS base address: a kernel launched with <<<>>> takes it as its
    first argument (host: rtGetC2cCtrlAddr, runtime/rt_ffts.h) and calls SetSyncBaseAddr
    first (ASCEND_910B.md; catlass examples' kernels: ``uint64_t fftsAddr`` then
    ``AscendC::SetSyncBaseAddr(fftsAddr)``)."""
    return any(i.op in ("cross_set", "cross_wait")
               for prog in k.programs for i, _ in iter_instrs(prog.body))


def _cores(k: Kernel) -> tuple[CoreType, ...]:
    """Core types with a non-empty program, AIC first."""
    return tuple(c for c in (CoreType.AIC, CoreType.AIV)
                 if (p := k.program(c)) is not None and p.body)


def _check_kernel(k: Kernel) -> None:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k.name):
        raise InternalCompilerError(f"kernel name {k.name!r} is not a C identifier")
    cores = _cores(k)
    for b in k.buffers:
        core = k.target.scope(b.scope).core
        if core not in cores:
            raise InternalCompilerError(
                f"kernel {k.name}: buffer {b.name} in {b.scope} belongs to the {core}, which has "
                "no program")
        if b.offsets is None:
            raise InternalCompilerError(
                f"kernel {k.name}: buffer {b.name} has no planned offsets; run memory planning "
                "before emission")


def _cpu_defines(t: Target) -> tuple[str, ...]:
    ub = t.scope(Scope.UB)
    cube = tuple(f"-DASCENDSCHED_{s.value}_USABLE={t.scope(s).usable}"
                 for s in (Scope.L1, Scope.L0A, Scope.L0B, Scope.L0C))
    return (
        f"-DASCENDSCHED_UB_CAPACITY={ub.capacity}",
        f"-DASCENDSCHED_UB_USABLE={ub.usable}",
        f"-DASCENDSCHED_BLOCK_BYTES={t.block_bytes}",
        f"-DASCENDSCHED_REPEAT_BYTES={t.repeat_bytes}",
        f"-DASCENDSCHED_MAX_REPEAT={t.max_repeat}",
        f"-DASCENDSCHED_EVENT_ID_LIMIT={max(t.event_ids) + 1}",
        *cube,
        # modelled relative error of Rsqrt/Reciprocal per dtype (sim/precision.py); 0: exact
        *(f"-DASCENDSCHED_REL_ERR_{fn.upper()}_{dt.upper()}="
          f"{t.approx_rel_error.get((fn, dt), 0.0)!r}"
          for fn in ("rsqrt", "reciprocal") for dt in ("float16", "float32")),
    )


# --------------------------------------------------------------------------- helpers
def _ctype(d: DType) -> str:
    return _C_TYPES[d.name]


def _cexpr(a: Affine) -> str:
    if a.const == 0 and not a.terms and not getattr(a, "divs", ()) and len(a.mods) == 1 \
            and a.mods[0][2] == 1:
        var, mod, _ = a.mods[0]
        return f"{var} % {mod}"  # drop the redundant parentheses of a lone (var % m)
    return a.c_expr()


def _dims2(r: Region) -> tuple[int, int, int, int]:
    """(rows, row_stride, cols, col_stride) of a region (1-D regions are one row)."""
    if len(r.dims) == 2:
        (rows, rs), (cols, cs) = r.dims
        return rows, rs, cols, cs
    if len(r.dims) == 1:
        (cols, cs), = r.dims
        return 1, cols * max(cs, 1), cols, cs
    raise InternalCompilerError(f"region {r}: emission supports 1-D and 2-D views only")


def _scalar(value: float | int | Affine, d: DType) -> str:
    ct = _ctype(d)
    if isinstance(value, Affine):  # a value of the loop variables (an index, lower/index_values)
        if value.is_const:
            value = value.const
        else:
            inner = f"static_cast<float>({_cexpr(value)})" if d.is_float else _cexpr(value)
            return f"static_cast<{ct}>({inner})" if ct != "float" else inner
    if d.is_float:
        v = float(value)
        if math.isnan(v):
            lit = "std::numeric_limits<float>::quiet_NaN()"
        elif math.isinf(v):
            lit = ("" if v > 0 else "-") + "std::numeric_limits<float>::infinity()"
        else:
            lit = repr(v) + "f"
        return lit if ct == "float" else f"static_cast<{ct}>({lit})"
    return f"static_cast<{ct}>({int(value)})"


def _ident(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", s)


def sync_comment(reasons: str) -> str:
    """A sync's comment in the emitted code: the first dependence that needed it and how many
    more (the IR keeps the whole list, ``;``-separated)."""
    parts = [r for r in (x.strip() for x in reasons.split("; ")) if r]
    if len(parts) <= 1:
        return reasons.strip()
    return f"{parts[0]} (+{len(parts) - 1} more)"


def _comment(text: str) -> str:
    text = " ".join(str(text).split())
    return f"  // {text}" if text else ""


# Physical scope -> (TPosition of its TBuf, variable name); kernel_tpipe.h positions on 910B.
_CUBE_TBUF = {Scope.L1: ("A1", "l1buf"), Scope.L0A: ("A2", "l0abuf"), Scope.L0B: ("B2", "l0bbuf"),
              Scope.L0C: ("CO1", "l0cbuf")}
_KTYPE_NOTE = {
    "KERNEL_TYPE_AIV_ONLY": "launch Vector cores only",
    "KERNEL_TYPE_AIC_ONLY": "launch Cube cores only: blockDim Cube cores",
    "KERNEL_TYPE_MIX_AIC_1_1": "one Cube and one Vector core per block",
}
_CUBE_API_LINES = (
    "//   DataCopy(Nd2NzParams) GM->L1      include/basic_api/kernel_operator_data_copy_intf.h,",
    "//                                     kernel_struct_data_copy.h",
    "//   LoadData, LoadDataWithTranspose   include/basic_api/kernel_operator_mm_intf.h,",
    "//   Mmad, MmadParams                  kernel_struct_mm.h",
    "//   Fixpipe, FixpipeParamsV220        include/basic_api/kernel_operator_fixpipe_intf.h,",
    "//                                     kernel_struct_fixpipe.h",
    "//   KERNEL_TASK_TYPE_DEFAULT          docs 设置Kernel类型 (hiascend atlasascendc_api_07_0218)",
    "//   ASCEND_IS_AIC / ASCEND_IS_AIV     impl/utils/sys_macros.h",
)

_CMP = {"lt": "LT", "gt": "GT", "le": "LE", "ge": "GE", "eq": "EQ", "ne": "NE"}
_ROUND = {"rint": "CAST_RINT", "trunc": "CAST_TRUNC", "floor": "CAST_FLOOR", "ceil": "CAST_CEIL",
          "round": "CAST_ROUND", "none": "CAST_NONE"}
_BINARY = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "max": "Max", "min": "Min"}
_UNARY = {"exp": "Exp", "ln": "Ln", "sqrt": "Sqrt", "rsqrt": "Rsqrt", "reciprocal": "Reciprocal",
          "abs": "Abs", "relu": "Relu"}
_SCALAR = {"adds": "Adds", "muls": "Muls", "maxs": "Maxs", "mins": "Mins"}
_REDUCE = {"sum": "WholeReduceSum", "max": "WholeReduceMax", "min": "WholeReduceMin"}


# --------------------------------------------------------------------------- kernel printer
class _KernelPrinter:
    """Prints the kernel .cpp: declarations, then the AIV program statement by statement."""

    def __init__(self, kernel: Kernel) -> None:
        self.k = kernel
        self.t = kernel.target
        self.lines: list[str] = []
        self.indent = 1
        gm_names = {p.name: _ident(p.name) + "_gm" for p in kernel.params}
        taken = {b.name for b in kernel.buffers}
        self.gm_var = {n: (v + "_" if v in taken else v) for n, v in gm_names.items()}
        self.row_var_depth = 0
        self.core = CoreType.AIV  # core of the program being printed

    # ---- output helpers
    def emit(self, line: str = "") -> None:
        self.lines.append(("    " * self.indent + line) if line else "")

    def print(self) -> str:
        k = self.k
        args = ["uint64_t fftsAddr"] if _uses_ffts(k) else []
        args += [f"GM_ADDR {_ident(p.name)}" for p in k.params if p.kind != "workspace"]
        args += ["GM_ADDR workspace", "GM_ADDR tiling"]
        head = [
            f"// Kernel '{k.name}' for {self.t.name} ({self.t.npu_arch}), generated by ascendsched.",
            "// Do not edit: regenerate from the schedule instead.",
        ]
        head += [f"// note: {n}" for n in k.notes]
        head += [
            "//",
            "// AscendC APIs used (signatures and units checked against mirror-cann/asc-devkit):",
            "//   TPipe, TBuf::GetWithOffset        include/basic_api/kernel_tpipe.h",
            "//   GlobalTensor, LocalTensor         include/basic_api/kernel_tensor.h",
            "//   DataCopy, DataCopyPad, Copy       include/basic_api/kernel_operator_data_copy_intf.h",
            "//   DataCopyParams, DataCopyExtParams include/basic_api/kernel_struct_data_copy.h",
            "//   Add/Sub/Mul/Div/Max/Min           include/basic_api/kernel_operator_vec_binary_intf.h",
            "//   Exp/Ln/Sqrt/Rsqrt/Reciprocal/...  include/basic_api/kernel_operator_vec_unary_intf.h",
            "//   Adds/Muls/Maxs/Mins               include/basic_api/kernel_operator_vec_binary_scalar_intf.h",
            "//   Duplicate                         include/basic_api/kernel_operator_vec_duplicate_intf.h",
            "//   Cast                              include/basic_api/kernel_operator_vec_vconv_intf.h",
            "//   WholeReduceSum/Max/Min            include/basic_api/kernel_operator_vec_reduce_intf.h",
            "//   Brcb                              include/basic_api/kernel_operator_vec_brcb_intf.h",
            "//   Compare, Select                   include/basic_api/kernel_operator_vec_cmpsel_intf.h",
            "//   SetFlag, WaitFlag, PipeBarrier    include/basic_api/kernel_operator_block_sync_intf.h",
            "//   GetBlockIdx                       include/basic_api/kernel_operator_sys_var_intf.h",
            *(_CUBE_API_LINES if CoreType.AIC in _cores(k) else ()),
            '#include "kernel_operator.h"',
            f'#include "{k.name}_tiling.h"',
            "",
            "using namespace AscendC;",
            "",
            *([f"// (named {c_name(k.name)}: '{k.name}' is a CCE builtin of the global namespace)"]
              if c_name(k.name) != k.name else []),
            f'extern "C" __global__ __aicore__ void {c_name(k.name)}({", ".join(args)})',
            "{",
        ]
        self.lines = []
        cores = _cores(k)
        ktype = {(CoreType.AIC,): "KERNEL_TYPE_AIC_ONLY",
                 (CoreType.AIC, CoreType.AIV): "KERNEL_TYPE_MIX_AIC_1_1"}.get(
                     cores, "KERNEL_TYPE_AIV_ONLY")
        self.emit(f"KERNEL_TASK_TYPE_DEFAULT({ktype});  // {_KTYPE_NOTE[ktype]}")
        if _uses_ffts(k):
            self.emit("SetSyncBaseAddr(fftsAddr);  // FFTS base of the cross-core flags, before any of them")
        self._declarations()
        if cores == (CoreType.AIV,) or not cores:  # vector kernel: no core sections
            self._core_buffers(CoreType.AIV)
            prog = k.program(CoreType.AIV)
            if prog is not None:
                self.emit("")
                self._body(prog.body)
                self._body(program_epilogue(CoreType.AIV))
        else:
            for core in cores:
                self.core = core
                self.emit("")
                macro = "ASCEND_IS_AIC" if core == CoreType.AIC else "ASCEND_IS_AIV"
                what = "Cube core: GM -> L1 -> L0A/L0B -> Mmad -> L0C -> GM" \
                    if core == CoreType.AIC else "Vector core"
                self.emit(f"if {macro} {{  // {what}")
                self.indent += 1
                self._core_buffers(core)
                self.emit("")
                self._body(k.program(core).body)
                self._body(program_epilogue(core))
                self.indent -= 1
                self.emit("}")
        return "\n".join(head + self.lines + ["}", ""])

    def _declarations(self) -> None:
        k = self.k
        self.emit("(void)tiling;  // every size below is a compile-time constant of the schedule")
        self.emit(f"const int64_t {BLOCK_IDX} = GetBlockIdx();  // 0 .. {k.block_dim - 1}")
        self.emit(f"(void){BLOCK_IDX};")
        self.emit("")
        self.emit("// Global memory")
        ws_off = 0
        for p in k.params:
            ct = _ctype(p.dtype)
            var = self.gm_var[p.name]
            if p.kind == "workspace":
                src = f"workspace + {ws_off}"
                ws_off += -(-p.nbytes // _GM_WORKSPACE_ALIGN) * _GM_WORKSPACE_ALIGN
            else:
                src = _ident(p.name)
            self.emit(f"GlobalTensor<{ct}> {var};  // {p.kind} {p.dtype}{list(p.shape)}")
            self.emit(f"{var}.SetGlobalBuffer((__gm__ {ct}*){src}, {p.elems});")

    def _core_buffers(self, core: CoreType) -> None:
        """TPipe and one TBuf per physical scope of ``core`` with its buffers at planned offsets."""
        if core == CoreType.AIC:
            self._cube_buffers()
            return
        k = self.k
        bufs = [b for b in k.buffers if b.scope == Scope.UB]
        if not bufs:
            return
        ub = self.t.scope(Scope.UB)
        arena = max(o + b.nbytes for b in bufs for o in (b.offsets or ()))
        arena = -(-arena // self.t.block_bytes) * self.t.block_bytes
        self.emit("")
        self.emit("// Unified Buffer, as planned by ascendsched's memory planner. One TPipe owns one")
        self.emit("// TBuf<VECCALC> spanning the planned arena; every IR buffer copy is a LocalTensor")
        self.emit("// at its planned byte offset (TBuf::GetWithOffset<T>(count, byteOffset), offset")
        self.emit("// 32-byte aligned). A TBuf per buffer cannot express the plan: InitBuffer hands")
        self.emit("// out disjoint space in call order, while the planner reuses dead space (two")
        self.emit("// buffers may share an address when their lifetimes do not overlap).")
        self.emit(f"// Arena: {arena} B of {ub.usable} B usable UB.")
        self.emit("TPipe pipe;")
        self.emit("TBuf<TPosition::VECCALC> ubuf;")
        self.emit(f"pipe.InitBuffer(ubuf, {arena});")
        for b in bufs:
            self._declare_buffer(b)

    def _cube_buffers(self) -> None:
        k = self.k
        scopes = [s for s in _CUBE_TBUF if any(b.scope == s for b in k.buffers)]
        if not scopes:
            return
        self.emit("// Cube memories, as planned by ascendsched's memory planner: one TBuf per physical")
        self.emit("// scope (TPosition A1 = L1, A2 = L0A, B2 = L0B, CO1 = L0C), each spanning the planned")
        self.emit("// arena, and every IR buffer copy a LocalTensor at its planned byte offset")
        self.emit("// (TBuf::GetWithOffset<T>(count, byteOffset)). Starts honour the scope alignment of")
        self.emit("// the target (L0A/L0B 512 B, L0C 1 KB for Mmad).")
        self.emit("TPipe pipe;")
        for sc in scopes:
            pos, var = _CUBE_TBUF[sc]
            bufs = [b for b in k.buffers if b.scope == sc]
            arena = max(o + b.nbytes for b in bufs for o in (b.offsets or ()))
            arena = -(-arena // self.t.block_bytes) * self.t.block_bytes
            self.emit(f"TBuf<TPosition::{pos}> {var};  // {sc}: arena {arena} B of "
                      f"{self.t.scope(sc).usable} B usable")
            self.emit(f"pipe.InitBuffer({var}, {arena});")
        for sc in scopes:
            for b in k.buffers:
                if b.scope == sc:
                    self._declare_buffer(b, _CUBE_TBUF[sc][1])
        self.emit("// TPipe's constructor sets HardEvent::M_MTE1 event ids 0, 1, 2 on the AIC and its")
        self.emit("// destructor waits them (asc-devkit impl/basic_api/kernel_tpipe_impl.h:100-113,")
        self.emit("// 571-581): release them now, as catlass does (include/catlass/arch/resource.hpp:35-37),")
        self.emit("// so every event id below is this kernel's own. The LocalTensors above stay valid;")
        self.emit("// the program ends with PipeBarrier<PIPE_ALL> (the destructor's drain).")
        self.emit("pipe.Destroy();")

    def _declare_buffer(self, b: Buffer, tbuf: str = "ubuf") -> None:
        ct = _ctype(b.dtype)
        offs = b.offsets or ()
        spans = ", ".join(f"[{o}, {o + b.nbytes})" for o in offs)
        shape = f"{list(b.shape)} " if b.shape else ""
        self.emit(f"// {b.name}: {b.dtype}{shape}[{b.elems}] x{b.copies} at {b.scope} bytes {spans}"
                  + (f"; {b.comment}" if b.comment else ""))
        gets = [f"{tbuf}.GetWithOffset<{ct}>({b.elems}, {o})" for o in offs]
        if b.copies == 1:
            self.emit(f"LocalTensor<{ct}> {_ident(b.name)} = {gets[0]};")
        else:
            self.emit(f"LocalTensor<{ct}> {_ident(b.name)}[{b.copies}] = {{{', '.join(gets)}}};")

    # ---- statements
    def _body(self, body: tuple[Stmt, ...]) -> None:
        for s in body:
            if isinstance(s, For):
                self.emit(f"for (int64_t {s.var} = 0; {s.var} < {s.extent}; ++{s.var}) {{"
                          + _comment(s.comment))
                self.indent += 1
                self._body(s.body)
                self.indent -= 1
                self.emit("}")
            elif isinstance(s, If):
                cond = " && ".join(self._cond(c) for c in s.conds) or "true"
                self.emit(f"if ({cond}) {{" + _comment(s.comment))
                self.indent += 1
                self._body(s.body)
                self.indent -= 1
                self.emit("}")
            else:
                self._instr(s)

    def _cond(self, c: Cond) -> str:
        return f"({_cexpr(c.lhs)} {c.op} {c.rhs})"

    def _instr(self, i: Instr) -> None:
        handler = _OP_TABLE.get(i.op)
        if handler is None:
            raise UnsupportedError(f"kernel {self.k.name}: op {i.op!r} has no AscendC template")
        cube = i.op in CUBE_OPS
        if not i.is_sync and cube != (self.core == CoreType.AIC):
            where = "Cube (AIC)" if self.core == CoreType.AIC else "Vector (AIV)"
            raise UnsupportedError(
                f"kernel {self.k.name}: `{i}` cannot run on the {where} core: "
                f"{'cube ops belong to the AIC program' if cube else 'vector/UB ops belong to the AIV program'}")
        handler(self, i)

    # ---- operand expressions
    def _ub(self, r: Region, extra: str = "") -> str:
        b = self.k.buffer_map.get(r.tensor)
        if b is None:
            raise InternalCompilerError(f"{r}: {r.tensor} is not an on-chip buffer")
        base = _ident(b.name)
        if b.copies > 1:
            base += f"[{_cexpr(r.copy)}]"
        elif r.copy != Affine():
            raise InternalCompilerError(f"{r}: copy index on single-copy buffer {b.name}")
        off = _cexpr(r.offset) if r.offset != Affine() else ""
        if extra:
            off = f"{off} + {extra}" if off else extra
        return f"{base}[{off}]" if off else base

    def _gm(self, r: Region) -> str:
        if r.tensor not in self.k.param_map:
            raise InternalCompilerError(f"{r}: {r.tensor} is not a GM tensor")
        var = self.gm_var[r.tensor]
        return f"{var}[{_cexpr(r.offset)}]" if r.offset != Affine() else var

    def _esize(self, r: Region) -> int:
        return self.k.dtype_of(r.tensor).bytes

    def _blocks(self, elems: int, esize: int, what: str, i: Instr) -> int:
        nbytes = elems * esize
        if nbytes % self.t.block_bytes:
            raise InternalCompilerError(
                f"{i}: {what} of {nbytes} B is not a multiple of {self.t.block_bytes} B")
        return nbytes // self.t.block_bytes

    def _rep(self, r: Region, i: Instr) -> tuple[int, int]:
        """(block stride, repeat stride in blocks) of a vector operand."""
        rows, rs, _cols, cs = _dims2(r)
        if cs not in (0, 1):
            raise InternalCompilerError(f"{i}: column stride {cs} of {r.tensor} (0 or 1 only)")
        e = self._esize(r)
        if rows == 1:
            rep = 0  # one repeat: the repeat stride is never applied
        else:
            rep = self._blocks(rs, e, f"row stride of {r.tensor}", i)
        if rep > self.t.max_rep_stride:
            raise InternalCompilerError(f"{i}: repeat stride {rep} blocks exceeds {self.t.max_rep_stride}")
        return cs, rep

    def _vec_shape(self, i: Instr, r: Region, lane_bytes: int) -> tuple[int, int]:
        rows, _rs, cols, _cs = _dims2(r)
        if rows > self.t.max_repeat:
            raise InternalCompilerError(f"{i}: {rows} rows exceed max_repeat {self.t.max_repeat}")
        if cols * lane_bytes > self.t.repeat_bytes:
            raise InternalCompilerError(f"{i}: {cols} lanes of {lane_bytes} B exceed one repeat")
        return rows, cols

    def _line(self, i: Instr, call: str, note: str = "") -> None:
        comment = sync_comment(i.comment) if i.is_sync else i.comment
        text = comment + (f" ({note})" if note and comment else note)
        self.emit(call + _comment(text))


# --------------------------------------------------------------------------- op templates
def _dma(p: _KernelPrinter, i: Instr) -> None:
    to_ub = i.op == "copy_gm_ub"
    ub_r, gm_r = (i.writes[0], i.reads[0]) if to_ub else (i.reads[0], i.writes[0])
    rows, rs_ub, cols, cs_ub = _dims2(ub_r)
    rows_g, rs_gm, cols_g, cs_gm = _dims2(gm_r)
    if (rows, cols) != (rows_g, cols_g) or cs_ub != 1 or cs_gm != 1:
        raise InternalCompilerError(f"{i}: DMA views must match and have column stride 1")
    e = p._esize(ub_r)
    blk = p.t.block_bytes
    row = cols * e
    if rows > 1 and (rs_ub * e) % blk:
        raise InternalCompilerError(f"{i}: UB row stride {rs_ub * e} B is not a multiple of {blk} B")
    ub_pitch = rs_ub * e if rows > 1 else -(-row // blk) * blk
    gm_pitch = rs_gm * e if rows > 1 else row
    dst, src = (p._ub(ub_r), p._gm(gm_r)) if to_ub else (p._gm(gm_r), p._ub(ub_r))
    what = f"{rows} x {row} B"
    if row % blk == 0 and gm_pitch % blk == 0 and ub_pitch >= row and gm_pitch >= row:
        ub_gap, gm_gap = (ub_pitch - row) // blk, (gm_pitch - row) // blk
        src_gap, dst_gap = (gm_gap, ub_gap) if to_ub else (ub_gap, gm_gap)
        params = f"DataCopyParams({rows}, {row // blk}, {src_gap}, {dst_gap})"
        p._line(i, f"DataCopy({dst}, {src}, {params});", f"{what}; lengths in {blk} B blocks")
        return
    ub_row_blocks = -(-row // blk)
    if ub_pitch < ub_row_blocks * blk or gm_pitch < row:
        raise InternalCompilerError(f"{i}: rows overlap ({what}, UB pitch {ub_pitch} B)")
    ub_gap = (ub_pitch - ub_row_blocks * blk) // blk
    gm_gap = gm_pitch - row
    src_gap, dst_gap = (gm_gap, ub_gap) if to_ub else (ub_gap, gm_gap)
    params = f"DataCopyExtParams({rows}, {row}, {src_gap}, {dst_gap}, 0)"
    units = "GM gap in bytes, UB gap in blocks"
    if to_ub:
        ct = _ctype(p.k.dtype_of(ub_r.tensor))
        pad = f"DataCopyPadExtParams<{ct}>(false, 0, 0, 0)"
        p._line(i, f"DataCopyPad({dst}, {src}, {params}, {pad});", f"{what}; {units}")
    else:
        p._line(i, f"DataCopyPad({dst}, {src}, {params});", f"{what}; {units}")


def _binary_params(p: _KernelPrinter, i: Instr, dst: Region, a: Region, b: Region) -> str:
    (db, dr), (ab, ar), (bb, br) = p._rep(dst, i), p._rep(a, i), p._rep(b, i)
    return f"BinaryRepeatParams({db}, {ab}, {bb}, {dr}, {ar}, {br})"


def _unary_params(p: _KernelPrinter, i: Instr, dst: Region, src: Region) -> str:
    (db, dr), (sb, sr) = p._rep(dst, i), p._rep(src, i)
    return f"UnaryRepeatParams({db}, {sb}, {dr}, {sr})"


def _vec_binary(p: _KernelPrinter, i: Instr) -> None:
    d, (a, b) = i.writes[0], i.reads
    rows, cols = p._vec_shape(i, d, p._esize(d))
    fn = _BINARY[str(i.attr("fn"))]
    p._line(i, f"{fn}({p._ub(d)}, {p._ub(a)}, {p._ub(b)}, {cols}, {rows}, "
               f"{_binary_params(p, i, d, a, b)});")


def _vec_unary(p: _KernelPrinter, i: Instr) -> None:
    d, s = i.writes[0], i.reads[0]
    rows, cols = p._vec_shape(i, d, p._esize(d))
    fn = str(i.attr("fn"))
    if fn == "copy":
        (db, dr), (sb, sr) = p._rep(d, i), p._rep(s, i)
        p._line(i, f"Copy({p._ub(d)}, {p._ub(s)}, {cols}, {rows}, "
                   f"CopyRepeatParams({db}, {sb}, {dr}, {sr}));")
        return
    p._line(i, f"{_UNARY[fn]}({p._ub(d)}, {p._ub(s)}, {cols}, {rows}, "
               f"{_unary_params(p, i, d, s)});")


def _vec_scalar(p: _KernelPrinter, i: Instr) -> None:
    d, s = i.writes[0], i.reads[0]
    rows, cols = p._vec_shape(i, d, p._esize(d))
    fn = _SCALAR[str(i.attr("fn"))]
    scalar = _scalar(i.attr("scalar"), p.k.dtype_of(d.tensor))  # type: ignore[arg-type]
    p._line(i, f"{fn}({p._ub(d)}, {p._ub(s)}, {scalar}, {cols}, {rows}, "
               f"{_unary_params(p, i, d, s)});")


def _vec_dup(p: _KernelPrinter, i: Instr) -> None:
    d = i.writes[0]
    rows, cols = p._vec_shape(i, d, p._esize(d))
    blk, rep = p._rep(d, i)
    value = _scalar(i.attr("value"), p.k.dtype_of(d.tensor))  # type: ignore[arg-type]
    p._line(i, f"Duplicate({p._ub(d)}, {value}, {cols}, {rows}, {blk}, {rep});")


def _vec_cast(p: _KernelPrinter, i: Instr) -> None:
    d, s = i.writes[0], i.reads[0]
    rows, cols = p._vec_shape(i, d, max(p._esize(d), p._esize(s)))
    mode = _ROUND[str(i.attr("round", "none"))]
    p._line(i, f"Cast({p._ub(d)}, {p._ub(s)}, RoundMode::{mode}, {cols}, {rows}, "
               f"{_unary_params(p, i, d, s)});")


def _vec_reduce(p: _KernelPrinter, i: Instr) -> None:
    d, s = i.writes[0], i.reads[0]
    rows, cols = p._vec_shape(i, s, p._esize(s))
    _sb, sr = p._rep(s, i)
    drows, drs, _dc, _dcs = _dims2(d)
    if drows != rows:
        raise InternalCompilerError(f"{i}: reduce dst has {drows} rows, src {rows}")
    dst_rep = drs if rows > 1 else 1  # units of one result (sizeof(T)), docs WholeReduceMax
    fn = str(i.attr("fn"))
    order = "" if fn == "sum" else ", ReduceOrder::ORDER_ONLY_VALUE"
    p._line(i, f"{_REDUCE[fn]}({p._ub(d)}, {p._ub(s)}, {cols}, {rows}, {dst_rep}, 1, {sr}{order});")


def _vec_brcb(p: _KernelPrinter, i: Instr) -> None:
    d, s = i.writes[0], i.reads[0]
    n, srs, _one, _ = _dims2(s)
    e = p._esize(d)
    per = p.t.repeat_bytes // p.t.block_bytes  # src elements (= dst blocks) per repeat
    if n % per or (n > 1 and srs != 1):
        raise InternalCompilerError(f"{i}: Brcb needs a contiguous source of a multiple of {per}")
    drows, drs, _dcols, _ = _dims2(d)
    blk = p._blocks(drs, e, "Brcb destination row stride", i)
    if blk < 1:  # docs Brcb.md:123: dstBlkStride = 0 is undefined behaviour
        raise InternalCompilerError(f"{i}: Brcb destination blocks must be apart "
                                    "(dstBlkStride >= 1; 0 is undefined on the hardware)")
    p._line(i, f"Brcb({p._ub(d)}, {p._ub(s)}, {n // per}, BrcbRepeatParams({blk}, {blk * per}));")


def _cmp_rows(p: _KernelPrinter, i: Instr, mask: Region, data: Region) -> tuple[int, int, bool]:
    """(rows, cols, packed): packed when the mask rows sit where the hardware packs them."""
    e = p._esize(data)
    rows, cols = p._vec_shape(i, data, e)
    lane_bytes = p.t.repeat_bytes // e // 8  # mask bytes one repeat produces/consumes
    _mrows, mrs, _mcols, _ = _dims2(mask)
    return rows, cols, rows == 1 or mrs == lane_bytes


def _per_row(p: _KernelPrinter, i: Instr, regions: list[Region], make_call) -> None:
    """One repeat per row, for masks whose row stride differs from the packed layout."""
    rows = _dims2(regions[0])[0]
    p.emit(f"for (int64_t row_ = 0; row_ < {rows}; ++row_) {{  // one repeat per mask row:"
           " the hardware packs mask bits per repeat")
    p.indent += 1
    exprs = [p._ub(r, f"row_ * {_dims2(r)[1]}") for r in regions]
    p._line(i, make_call(exprs))
    p.indent -= 1
    p.emit("}")


def _vec_cmp(p: _KernelPrinter, i: Instr) -> None:
    m, (a, b) = i.writes[0], i.reads
    rows, cols, packed = _cmp_rows(p, i, m, a)
    mode = _CMP[str(i.attr("fn"))]
    (ab, ar), (bb, br) = p._rep(a, i), p._rep(b, i)
    params = f"BinaryRepeatParams(1, {ab}, {bb}, 8, {ar}, {br})"
    if packed:
        p._line(i, f"Compare({p._ub(m)}, {p._ub(a)}, {p._ub(b)}, CMPMODE::{mode}, {cols}, {rows}, "
                   f"{params});", "dst strides unused: mask bits are packed per repeat")
    else:
        _per_row(p, i, [m, a, b], lambda ex: f"Compare({ex[0]}, {ex[1]}, {ex[2]}, CMPMODE::{mode}, "
                                             f"{cols}, 1, {params});")


def _vec_select(p: _KernelPrinter, i: Instr) -> None:
    d, (m, a, b) = i.writes[0], i.reads
    rows, cols, packed = _cmp_rows(p, i, m, d)
    params = _binary_params(p, i, d, a, b)
    if packed:
        p._line(i, f"Select({p._ub(d)}, {p._ub(m)}, {p._ub(a)}, {p._ub(b)}, "
                   f"SELMODE::VSEL_TENSOR_TENSOR_MODE, {cols}, {rows}, {params});")
    else:
        _per_row(p, i, [d, m, a, b], lambda ex: f"Select({ex[0]}, {ex[1]}, {ex[2]}, {ex[3]}, "
                                                f"SELMODE::VSEL_TENSOR_TENSOR_MODE, {cols}, 1, {params});")


def _event(p: _KernelPrinter, i: Instr, src: Pipe, dst: Pipe) -> str:
    if not p.t.is_legal_event(p.core, src, dst):
        raise InternalCompilerError(f"{i}: HardEvent {src}_{dst} does not exist on {p.core}")
    return f"HardEvent::{src}_{dst}"


def _set_flag(p: _KernelPrinter, i: Instr) -> None:
    dst = Pipe(i.attr("dst"))
    eid = Affine.of(i.attr("event_id"))  # type: ignore[arg-type]
    p._line(i, f"SetFlag<{_event(p, i, i.pipe, dst)}>({_cexpr(eid)});")


def _wait_flag(p: _KernelPrinter, i: Instr) -> None:
    src = Pipe(i.attr("src"))
    eid = Affine.of(i.attr("event_id"))  # type: ignore[arg-type]
    p._line(i, f"WaitFlag<{_event(p, i, src, i.pipe)}>({_cexpr(eid)});")


def _barrier(p: _KernelPrinter, i: Instr) -> None:
    p._line(i, f"PipeBarrier<PIPE_{i.pipe}>();")


def _cross_set(p: _KernelPrinter, i: Instr) -> None:
    p._line(i, f"CrossCoreSetFlag<{i.attr('mode', 2)}, PIPE_{i.pipe}>({i.attr('flag_id')});")


def _cross_wait(p: _KernelPrinter, i: Instr) -> None:
    # the template args carry the IR's mode and pipe (they do not change the 910B behaviour:
    # the wait blocks every pipe of the core, docs CrossCoreWaitFlag(ISASI))
    p._line(i, f"CrossCoreWaitFlag<{i.attr('mode', 2)}, PIPE_{i.pipe}>({i.attr('flag_id')});")


# --------------------------------------------------------------------------- cube op templates
def _cbool(v: object) -> str:
    if not isinstance(v, bool):
        raise InternalCompilerError(f"expected a bool parameter, got {v!r}")
    return "true" if v else "false"


def _cube_args(p: _KernelPrinter, i: Instr) -> dict:
    """The validated API params (lower/ir.py cube_params: all present, in documented ranges).

    The printed call moves the bytes its params imply, while the polyhedral analysis and the
    syncs used the regions' dims: they must describe the same box (ir.cube_footprints).
    """
    a = cube_params(i)
    regions = i.writes + i.reads
    boxes = cube_footprints(i.op, a, tuple(p.k.dtype_of(r.tensor) for r in regions))
    for r, box in zip(regions, boxes, strict=True):
        if squeeze_dims(r.dims) != squeeze_dims(box):
            raise InternalCompilerError(
                f"kernel {p.k.name}: `{i}`: region {r} disagrees with the footprint "
                f"{[tuple(d) for d in box]} its params imply; build cube instructions with "
                "ir.make_cube_instr")
    return a


def _copy_gm_l1(p: _KernelPrinter, i: Instr) -> None:
    a = _cube_args(p, i)
    l1, gm = i.writes[0], i.reads[0]
    args = ", ".join(str(a[n]) for n in ("ndNum", "nValue", "dValue", "srcNdMatrixStride",
                                         "srcDValue", "dstNzC0Stride", "dstNzNStride",
                                         "dstNzMatrixStride"))
    note = (f"ND {a['nValue']} x {a['dValue']} -> NZ, column groups {a['dstNzC0Stride']} x 32 B "
            f"apart" + (f", {a['ndNum']} matrices" if a["ndNum"] != 1 else ""))
    p._line(i, f"DataCopy({p._ub(l1)}, {p._gm(gm)}, Nd2NzParams({args}));", note)


def _load2d(p: _KernelPrinter, i: Instr) -> None:
    a = _cube_args(p, i)
    dst, src = i.writes[0], i.reads[0]
    args = (f"{a['startIndex']}, {a['repeatTimes']}, {a['srcStride']}, {a['sid']}, {a['dstGap']}, "
            f"{_cbool(a['ifTranspose'])}, {a['addrMode']}")
    note = (f"{a['repeatTimes']} fractals, src stride {a['srcStride']} x 512 B"
            + (", each transposed" if a["ifTranspose"] else ""))
    p._line(i, f"LoadData({p._ub(dst)}, {p._ub(src)}, LoadData2DParams({args}));", note)


def _load_transpose(p: _KernelPrinter, i: Instr) -> None:
    a = _cube_args(p, i)
    dst, src = i.writes[0], i.reads[0]
    args = ", ".join(str(a[n]) for n in ("startIndex", "repeatTimes", "srcStride", "dstGap",
                                         "dstFracGap", "addrMode"))
    p._line(i, f"LoadDataWithTranspose({p._ub(dst)}, {p._ub(src)}, "
               f"LoadData2dTransposeParams({args}));",
            f"{a['repeatTimes']} transposed squares")


def _init_expr(v: object) -> str:
    if isinstance(v, Cond):
        return f"({_cexpr(v.lhs)} {v.op} {v.rhs})"
    return _cbool(v)


def _mmad(p: _KernelPrinter, i: Instr) -> None:
    a = _cube_args(p, i)
    c, (fm, filt) = i.writes[0], i.reads
    init = _init_expr(a["cmatrixInitVal"])
    params = (f"MmadParams({a['m']}, {a['n']}, {a['k']}, {a['unitFlag']}, "
              f"{_cbool(a['cmatrixSource'])}, {init})")
    note = "" if i.comment else (
        f"C[{a['m']} x {a['n']}] " + ("= A x B" if a["cmatrixInitVal"] is True else
                                      "+= A x B" if a["cmatrixInitVal"] is False else
                                      f"= A x B when {init}, else += A x B"))
    call = f"Mmad({p._ub(c)}, {p._ub(fm)}, {p._ub(filt)}, {{}});"
    if a["kDirectionAlign"] is not True:
        p._line(i, call.format(params), note)
        return
    p.emit("{")
    p.indent += 1
    p.emit(f"MmadParams mmadParams = {params};")
    p.emit("mmadParams.kDirectionAlign = true;  // float K aligned to 16 in L0A/L0B")
    p._line(i, call.format("mmadParams"), note)
    p.indent -= 1
    p.emit("}")


_QUANT = {"NoQuant": "QuantMode_t::NoQuant", "F322F16": "QuantMode_t::F322F16",
          "F322BF16": "QuantMode_t::F322BF16"}


def _fixpipe(p: _KernelPrinter, i: Instr) -> None:
    a = _cube_args(p, i)
    gm, l0c = i.writes[0], i.reads[0]
    quant = _QUANT.get(str(a["quantPre"]))
    if quant is None:
        raise UnsupportedError(f"{i}: quantPre {a['quantPre']!r} has no emission ({', '.join(_QUANT)})")
    t, u = _ctype(p.k.dtype_of(gm.tensor)), _ctype(p.k.dtype_of(l0c.tensor))
    params = (f"FixpipeParamsV220({a['nSize']}, {a['mSize']}, {a['srcStride']}, {a['dstStride']}, "
              f"{_cbool(a['reluEn'])}, {quant}, 0, {a['ndNum']}, {a['srcNdStride']}, "
              f"{a['dstNdStride']}, {a['unitFlag']})")
    note = "" if i.comment else f"{a['mSize']} x {a['nSize']} valid region, NZ -> ND"
    p._line(i, f"Fixpipe<{t}, {u}, CFG_ROW_MAJOR>({p._gm(gm)}, {p._ub(l0c)}, {params});", note)


_OP_TABLE = {
    "copy_gm_l1": _copy_gm_l1, "load_l0a": _load2d, "load_l0b": _load2d,
    "load_l0a_transpose": _load_transpose, "load_l0b_transpose": _load_transpose,
    "mmad": _mmad, "fixpipe": _fixpipe,
    "copy_gm_ub": _dma, "copy_ub_gm": _dma,
    "vec_binary": _vec_binary, "vec_unary": _vec_unary, "vec_scalar": _vec_scalar,
    "vec_dup": _vec_dup, "vec_cast": _vec_cast, "vec_reduce": _vec_reduce,
    "vec_brcb": _vec_brcb, "vec_cmp": _vec_cmp, "vec_select": _vec_select,
    "set_flag": _set_flag, "wait_flag": _wait_flag, "barrier": _barrier,
    "cross_set": _cross_set, "cross_wait": _cross_wait,
}


# --------------------------------------------------------------------------- other files
def _struct_name(k: Kernel) -> str:
    return "".join(w[:1].upper() + w[1:] for w in k.name.split("_")) + "TilingData"


def _tiling_fields(k: Kernel, tiling: dict) -> list[tuple[str, int]]:
    fields: list[tuple[str, int]] = [("blockDim", k.block_dim)]
    fields += [(f"{_ident(p.name)}Elems", p.elems) for p in k.params]
    for key, value in tiling.items():
        if not isinstance(value, int):
            raise InternalCompilerError(f"tiling field {key!r}: integers only, got {value!r}")
        fields.append((_ident(str(key)), value))
    return fields


def _tiling_header(k: Kernel, fields: list[tuple[str, int]]) -> str:
    lines = [
        f"// Tiling data of kernel '{k.name}', generated by ascendsched.",
        "// The kernel's sizes are compile-time constants of its schedule; the host fills this",
        "// struct and passes it as the kernel's `tiling` argument for reference and checks.",
        "#pragma once",
        "#include <cstdint>",
        "",
        f"struct {_struct_name(k)} {{",
    ]
    lines += [f"    int64_t {name} = {value};" for name, value in fields]
    lines += ["};", ""]
    return "\n".join(lines)


def _render(template: str, values: dict[str, str]) -> str:
    return Template((TEMPLATE_DIR / template).read_text()).substitute(values)


def _io_params(k: Kernel) -> tuple[list[GmTensor], list[GmTensor]]:
    args = [p for p in k.params if p.kind != "workspace"]
    return args, [p for p in k.params if p.kind == "workspace"]


def _workspace_bytes(k: Kernel) -> int:
    return sum(-(-p.nbytes // _GM_WORKSPACE_ALIGN) * _GM_WORKSPACE_ALIGN
               for p in k.params if p.kind == "workspace") or _GM_WORKSPACE_ALIGN


def _host_vars(k: Kernel, fields: list[tuple[str, int]]) -> dict[str, str]:
    args, _ws = _io_params(k)
    decl, h2d, d2h, free = [], [], [], []
    for p in args:
        n = _ident(p.name)
        decl.append(f"    const size_t {n}Bytes = {p.nbytes};\n"
                    f"    void* {n}Device = nullptr;\n"
                    f"    CHECK_ACL(aclrtMalloc(&{n}Device, {n}Bytes, ACL_MEM_MALLOC_HUGE_FIRST));")
        if p.kind == "input":
            h2d.append(f"    CopyFileToDevice(\"./input/{p.name}.bin\", {n}Device, {n}Bytes);")
        else:
            d2h.append(f"    CopyDeviceToFile({n}Device, {n}Bytes, \"./output/{p.name}.bin\");")
        free.append(f"    CHECK_ACL(aclrtFree({n}Device));")
    ffts = _uses_ffts(k)
    launch_args = ", ".join((["fftsAddr"] if ffts else []) + [f"{_ident(p.name)}Device" for p in args]
                            + ["workspaceDevice", "tilingDevice"])
    return {
        "name": k.name, "kernel_fn": c_name(k.name), "tiling_struct": _struct_name(k),
        "block_dim": str(k.block_dim),
        "decl": "\n".join(decl), "h2d": "\n".join(h2d), "d2h": "\n".join(d2h),
        "free": "\n".join(free), "launch_args": launch_args,
        "ffts_include": '#include "runtime/rt_ffts.h"  // rtGetC2cCtrlAddr' if ffts else "",
        "ffts_setup": ("    // cross-core flags: the kernel takes the FFTS base address first\n"
                       "    uint64_t fftsAddr = 0;\n    uint32_t fftsLen = 0;\n"
                       "    CHECK_ACL(rtGetC2cCtrlAddr(&fftsAddr, &fftsLen));") if ffts else "",
        "workspace_bytes": str(_workspace_bytes(k)),
    }


def _cmake_vars(k: Kernel) -> dict[str, str]:
    return {"name": k.name, "kernel_fn": c_name(k.name),
            "soc_version": _SOC_VERSION.get(k.target.name, "Ascend910B2"),
            "target": k.target.name, "npu_arch": k.target.npu_arch,
            "extra_libs": "    runtime  # rtGetC2cCtrlAddr (cross-core flags)\n" if _uses_ffts(k)
            else "", "cores_note": _cores_note(k)}


def _cores_note(k: Kernel) -> str:
    cores = _cores(k)
    if cores == (CoreType.AIC,):
        return (f"Cube only (`KERNEL_TYPE_AIC_ONLY`): blockDim = {k.block_dim} launches "
                f"{k.block_dim} Cube cores (the 910B2 has {k.target.num_aic}).")
    if cores == (CoreType.AIC, CoreType.AIV):
        return ("mix (`KERNEL_TYPE_MIX_AIC_1_1`): each of the blockDim blocks runs one Cube and one "
                "Vector core" + ("; the kernel's first argument is the FFTS base address "
                                 "(`rtGetC2cCtrlAddr`) for its cross-core flags." if _uses_ffts(k)
                                 else "."))
    return (f"Vector only (`KERNEL_TYPE_AIV_ONLY`): blockDim = {k.block_dim} Vector cores.")


def _cpu_main(k: Kernel, fields: list[tuple[str, int]]) -> str:
    args, _ws = _io_params(k)
    defines = "\n".join("#define " + d[2:].replace("=", " ", 1) for d in _cpu_defines(k.target))
    setup, call, outs = [], [], []
    for p in args:
        n = _ident(p.name)
        if p.kind == "input":
            setup.append(f"    std::vector<uint8_t> {n} = read_file(in_dir + \"/{p.name}.bin\", {p.nbytes});")
        else:
            setup.append(f"    std::vector<uint8_t> {n}({p.nbytes}, 0xFF);  // poisoned: unwritten output shows")
            outs.append(f"    write_file(out_dir + \"/{p.name}.bin\", {n});")
        setup.append(f"    ascendsched_rt::register_gm(\"{p.name}\", {n}.data(), {n}.size());")
        call.append(f"{n}.data()")
    ws_off = 0
    for p in _ws:
        setup.append(f"    ascendsched_rt::register_gm(\"{p.name}\", workspace.data() + {ws_off}, {p.nbytes});")
        ws_off += -(-p.nbytes // _GM_WORKSPACE_ALIGN) * _GM_WORKSPACE_ALIGN
    call += ["workspace.data()", "reinterpret_cast<GM_ADDR>(&tilingData)"]
    if _uses_ffts(k):
        call.insert(0, "0")  # fftsAddr: SetSyncBaseAddr is a no-op on the CPU
    cores = ", ".join(f'"{c}"' for c in (_cores(k) or (CoreType.AIV,)))
    return _render("cpu_main.cpp.in", {
        "name": k.name, "kernel_fn": c_name(k.name), "defines": defines,
        "setup": "\n".join(setup), "cores": cores,
        "call": ", ".join(call), "outputs": "\n".join(outs), "block_dim": str(k.block_dim),
        "tiling_struct": _struct_name(k), "workspace_bytes": str(_workspace_bytes(k)),
    })


def copy_runtime(dst: Path) -> None:
    """Copy the CPU runtime headers next to a project (for building it elsewhere)."""
    for f in RUNTIME_DIR.iterdir():
        if f.suffix in (".h", ".hpp"):
            shutil.copy2(f, Path(dst) / f.name)
