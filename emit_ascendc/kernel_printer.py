"""The kernel .cpp of an emitted project: its head, declarations, and each program's statements.

Loops and ifs become C ``for``/``if``, syncs their AscendC calls (here), and every other
instruction one AscendC call from the op templates (``ops_vector.py``, ``ops_cube.py``) through
``_OP_TABLE``. GM tensors are GlobalTensors over the kernel's arguments (workspaces at
``_GM_WORKSPACE_ALIGN`` steps of the workspace argument); every on-chip buffer copy is a
LocalTensor at its planned offset in one TBuf per physical scope.

Kernel type: KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIC_ONLY / _AIV_ONLY / _MIX_AIC_1_1 /
_MIX_AIC_1_2) (docs "设置Kernel类型", hiascend atlasascendc_api_07_0218); each core's code sits
in ``if ASCEND_IS_AIC { ... }`` / ``if ASCEND_IS_AIV { ... }`` (impl/utils/sys_macros.h:
constexpr per core, from __DAV_C220_CUBE__ / __DAV_C220_VEC__). A mix kernel is 1 AIC : 1 AIV
or, with ``Kernel.sub_blocks`` = 2, 1 AIC : 2 AIVs: there GetBlockIdx() on a Vector core is
``2 * block + GetSubBlockIdx()`` (asc-devkit impl/basic_api/dav_c220/
kernel_operator_sys_var_impl.h, GetBlockIdxImpl; docs GetBlockIdx.md), so ``block_idx`` is
``GetBlockIdx() / GetSubBlockNum()`` on both core types (GetSubBlockNum() is 1 on the AIC and
2 on an AIV of such a kernel, docs GetSubBlockNum(ISASI).md) and the AIV section binds
``sub_block_idx = GetSubBlockIdx()``. One TBuf per physical scope: TPosition A1 = L1
(A1 and B1 are the same memory), A2 = L0A, B2 = L0B, CO1 = L0C, C2 = the bias table
(include/basic_api/kernel_tpipe.h).
"""

from __future__ import annotations

from ascendsched.emit_ascendc.c_syntax import (
    _cexpr,
    _comment,
    _ctype,
    _dims2,
    _ident,
    c_name,
    sync_comment,
)
from ascendsched.emit_ascendc.ops_cube import CUBE_TEMPLATES
from ascendsched.emit_ascendc.ops_vector import VECTOR_TEMPLATES
from ascendsched.lower.affine import Affine, Cond
from ascendsched.lower.ir import (
    BLOCK_IDX,
    SUB_BLOCK_IDX,
    Buffer,
    For,
    If,
    Instr,
    Kernel,
    Region,
    Stmt,
    iter_instrs,
)
from ascendsched.lower.substitute import substitute
from ascendsched.lower.sync_ir import (
    Barrier,
    CrossSet,
    CrossSync,
    CrossWait,
    SetFlag,
    Sync,
    WaitFlag,
    program_epilogue,
)
from ascendsched.target.model import CoreType, Pipe, Scope

_GM_WORKSPACE_ALIGN = 512  # bytes between workspace tensors (best DMA alignment, ASCEND_910B.md)


def _uses_ffts(k: Kernel) -> bool:
    """Cross-core flags need the FFTS base address: a kernel launched with <<<>>> takes it as its
    first argument (host: rtGetC2cCtrlAddr, runtime/rt_ffts.h) and calls SetSyncBaseAddr
    first (ASCEND_910B.md; catlass examples' kernels: ``uint64_t fftsAddr`` then
    ``AscendC::SetSyncBaseAddr(fftsAddr)``)."""
    return any(isinstance(i, CrossSync) for prog in k.programs for i, _ in iter_instrs(prog.body))


def _uses_op(k: Kernel, op: str) -> bool:
    return any(i.op == op for prog in k.programs for i, _ in iter_instrs(prog.body))


def _cores(k: Kernel) -> tuple[CoreType, ...]:
    """Core types with a non-empty program, AIC first."""
    return tuple(c for c in (CoreType.AIC, CoreType.AIV)
                 if (p := k.program(c)) is not None and p.body)


# Physical scope -> (TPosition of its TBuf, variable name); kernel_tpipe.h positions on 910B.
_CUBE_TBUF = {Scope.L1: ("A1", "l1buf"), Scope.L0A: ("A2", "l0abuf"), Scope.L0B: ("B2", "l0bbuf"),
              Scope.L0C: ("CO1", "l0cbuf"), Scope.BT: ("C2", "btbuf")}
_KTYPE_NOTE = {
    "KERNEL_TYPE_AIV_ONLY": "launch Vector cores only",
    "KERNEL_TYPE_AIC_ONLY": "launch Cube cores only: blockDim Cube cores",
    "KERNEL_TYPE_MIX_AIC_1_1": "one Cube and one Vector core per block",
    "KERNEL_TYPE_MIX_AIC_1_2": "one Cube and two Vector cores per block",
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
            *(("//   FusedMulAdd, MulAddDst            include/basic_api/kernel_operator_vec_binary_intf.h",)
              if _uses_op(k, "vec_fma") else ()),
            "//   Exp/Ln/Sqrt/Rsqrt/Reciprocal/...  include/basic_api/kernel_operator_vec_unary_intf.h",
            "//   Adds/Muls/Maxs/Mins               include/basic_api/kernel_operator_vec_binary_scalar_intf.h",
            "//   Duplicate                         include/basic_api/kernel_operator_vec_duplicate_intf.h",
            "//   Cast                              include/basic_api/kernel_operator_vec_vconv_intf.h",
            "//   WholeReduceSum/Max/Min            include/basic_api/kernel_operator_vec_reduce_intf.h",
            "//   Brcb                              include/basic_api/kernel_operator_vec_brcb_intf.h",
            "//   Compare, Select                   include/basic_api/kernel_operator_vec_cmpsel_intf.h",
            "//   SetFlag, WaitFlag, PipeBarrier    include/basic_api/kernel_operator_block_sync_intf.h",
            "//   GetBlockIdx                       include/basic_api/kernel_operator_sys_var_intf.h",
            *(("//   GetSubBlockIdx, GetSubBlockNum    include/basic_api/kernel_operator_sys_var_intf.h",)
              if k.sub_blocks > 1 else ()),
            *(_CUBE_API_LINES if CoreType.AIC in _cores(k) else ()),
            *(("//   DataCopy(count) GM->L1, Fixpipe with a per-channel quant tensor (VDEQF16):",
               "//                                     the same headers",)
              if _uses_op(k, "fixpipe_quant") else ()),
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
        mix = "KERNEL_TYPE_MIX_AIC_1_2" if k.sub_blocks == 2 else "KERNEL_TYPE_MIX_AIC_1_1"
        ktype = {(CoreType.AIC,): "KERNEL_TYPE_AIC_ONLY",
                 (CoreType.AIC, CoreType.AIV): mix}.get(cores, "KERNEL_TYPE_AIV_ONLY")
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
                self._body(program_epilogue(k, CoreType.AIV))
        else:
            for core in cores:
                self.core = core
                self.emit("")
                macro = "ASCEND_IS_AIC" if core == CoreType.AIC else "ASCEND_IS_AIV"
                what = "Cube core: GM -> L1 -> L0A/L0B -> Mmad -> L0C -> GM" \
                    if core == CoreType.AIC else "Vector core"
                self.emit(f"if {macro} {{  // {what}")
                self.indent += 1
                if core == CoreType.AIV and k.sub_blocks > 1:
                    self.emit(f"const int64_t {SUB_BLOCK_IDX} = GetSubBlockIdx();  // which of "
                              "the block's 2 Vector cores: its half of each tile's rows")
                self._core_buffers(core)
                self.emit("")
                self._body(k.program(core).body)
                self._body(program_epilogue(k, core))
                self.indent -= 1
                self.emit("}")
        return "\n".join(head + self.lines + ["}", ""])

    def _declarations(self) -> None:
        k = self.k
        self.emit("(void)tiling;  // every size below is a compile-time constant of the schedule")
        if k.sub_blocks > 1:
            self.emit("// GetBlockIdx() counts each Vector core of a 1:2 kernel (2 * block + "
                      "GetSubBlockIdx()): divided by")
            self.emit("// GetSubBlockNum() (1 on the Cube core, 2 on a Vector core) it is the "
                      "block on both")
            self.emit(f"const int64_t {BLOCK_IDX} = GetBlockIdx() / GetSubBlockNum();  "
                      f"// 0 .. {k.block_dim - 1}")
        else:
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
            if isinstance(s, For) and s.extent == 1:
                self._one_trip(s)
            elif isinstance(s, For):
                self.emit(f"for (int64_t {s.var} = 0; {s.var} < {s.extent}; ++{s.var}) {{"
                          + _comment(s.comment))
                self.indent += 1
                self._body(s.body)
                self.indent -= 1
                self.emit("}")
            elif isinstance(s, If):
                # if (block_idx < 18); several joined as (a) && (b)
                conds = [self._cond(c) for c in s.conds]
                cond = conds[0] if len(conds) == 1 else \
                    " && ".join(f"({c})" for c in conds) or "true"
                self.emit(f"if ({cond}) {{" + _comment(s.comment))
                self.indent += 1
                self._body(s.body)
                self.indent -= 1
                self.emit("}")
            else:
                self._instr(s)

    def _one_trip(self, s: For) -> None:
        """A loop of one trip (a tile loop with one tile per core; a mixed kernel keeps each
        tile class's loop so that both programs share the skeleton) as a block, its variable
        0 in every index (lower/substitute.py)."""
        trip = f"one trip, {s.var} = 0"
        self.emit("{" + _comment(f"{s.comment} ({trip})" if s.comment else trip))
        self.indent += 1
        self._body(substitute(s.body, {s.var: Affine()}))
        self.indent -= 1
        self.emit("}")

    def _cond(self, c: Cond) -> str:
        return f"{_cexpr(c.lhs)} {c.op} {c.rhs}"

    def _instr(self, i: Instr) -> None:
        if isinstance(i, Sync):
            _SYNC_TABLE[type(i)](self, i)  # type: ignore[operator]
        else:
            _OP_TABLE[i.op](self, i)  # a known op in its core's program (verified)

    # ---- operand expressions
    def _ub(self, r: Region, extra: str = "") -> str:
        b = self.k.buffer_map[r.tensor]
        base = _ident(b.name)
        if b.copies > 1:  # (a single-copy buffer has no copy index: verified)
            base += f"[{_cexpr(r.copy)}]"
        off = _cexpr(r.offset) if r.offset != Affine() else ""
        if extra:
            off = f"{off} + {extra}" if off else extra
        return f"{base}[{off}]" if off else base

    def _gm(self, r: Region) -> str:
        var = self.gm_var[r.tensor]
        return f"{var}[{_cexpr(r.offset)}]" if r.offset != Affine() else var

    def _esize(self, r: Region) -> int:
        return self.k.dtype_of(r.tensor).bytes

    def _blocks(self, elems: int, esize: int) -> int:
        """``elems`` elements of ``esize`` bytes in 32 B blocks (a whole number: verified)."""
        return elems * esize // self.t.block_bytes

    def _rep(self, r: Region) -> tuple[int, int]:
        """(block stride, repeat stride in blocks) of a vector operand (block stride 0 or 1,
        repeat stride within ``max_rep_stride``: verified)."""
        rows, rs, _cols, cs = _dims2(r)
        # one repeat: the repeat stride is never applied
        return cs, 0 if rows == 1 else self._blocks(rs, self._esize(r))

    def _vec_shape(self, r: Region) -> tuple[int, int]:
        """(repeats, lanes) of a vector operand (within the repeat limits: verified)."""
        rows, _rs, cols, _cs = _dims2(r)
        return rows, cols

    def _line(self, i: Instr, call: str, note: str = "") -> None:
        comment = sync_comment(i.comment) if isinstance(i, Sync) else i.comment
        text = comment + (f" ({note})" if note and comment else note)
        self.emit(call + _comment(text))


# --------------------------------------------------------------------------- sync templates
def _event(p: _KernelPrinter, i: Instr, src: Pipe, dst: Pipe) -> str:
    return f"HardEvent::{src}_{dst}"  # one the core has (verified)


def _set_flag(p: _KernelPrinter, i: SetFlag) -> None:
    p._line(i, f"SetFlag<{_event(p, i, i.src, i.dst)}>({_cexpr(i.event_id)});")


def _wait_flag(p: _KernelPrinter, i: WaitFlag) -> None:
    p._line(i, f"WaitFlag<{_event(p, i, i.src, i.dst)}>({_cexpr(i.event_id)});")


def _barrier(p: _KernelPrinter, i: Barrier) -> None:
    p._line(i, f"PipeBarrier<PIPE_{i.pipe}>();")


def _cross_set(p: _KernelPrinter, i: CrossSet) -> None:
    p._line(i, f"CrossCoreSetFlag<{i.mode}, PIPE_{i.pipe}>({i.flag_id});")


def _cross_wait(p: _KernelPrinter, i: CrossWait) -> None:
    # the template args carry the IR's mode and pipe (they do not change the 910B behaviour:
    # the wait blocks every pipe of the core, docs CrossCoreWaitFlag(ISASI))
    p._line(i, f"CrossCoreWaitFlag<{i.mode}, PIPE_{i.pipe}>({i.flag_id});")


_OP_TABLE = {**CUBE_TEMPLATES, **VECTOR_TEMPLATES}
_SYNC_TABLE = {SetFlag: _set_flag, WaitFlag: _wait_flag, Barrier: _barrier,
               CrossSet: _cross_set, CrossWait: _cross_wait}
