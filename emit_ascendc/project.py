"""Kernel IR -> AscendC C++ project: kernel, tiling struct, ACL host launcher, CMake, CPU driver.

The emitter decides nothing the IR did not decide: each ``Instr`` becomes one AscendC call
(``_OP_TABLE`` in kernel_printer.py), loops and ifs become C ``for``/``if``, and every hardware
number comes from ``kernel.target``. Input is a *final* kernel: memory planned (every
``Buffer`` has ``offsets``) and synchronised (``set_flag``/``wait_flag``/``barrier``
instructions present). ``emit_project`` runs ``lower/verify.py`` on it first, and the printers
trust the IR contract (no check of theirs repeats one of the verifier's).

This module writes the project's files: the kernel .cpp from ``kernel_printer.py``, the tiling
struct, the ACL host launcher, CMake and README from ``templates/``, and the driver of the CPU
runtime (``runtime/``), whose limits come from the target as ``-D`` flags.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from string import Template

from ascendsched.emit_ascendc.c_syntax import _ident, c_name
from ascendsched.emit_ascendc.kernel_printer import (
    _GM_WORKSPACE_ALIGN,
    _cores,
    _KernelPrinter,
    _uses_ffts,
)
from ascendsched.errors import InternalCompilerError
from ascendsched.lower.fixpipe_quant import M1_MASK, SIGN_BIT
from ascendsched.lower.ir import GmTensor, Kernel
from ascendsched.lower.verify import verify as verify_ir
from ascendsched.target.model import CoreType, Scope, Target

RUNTIME_DIR = Path(__file__).parent / "runtime"
TEMPLATE_DIR = Path(__file__).parent / "templates"

# CANN SOC_VERSION used as the CMake default, per target (a build setting, not a model number).
_SOC_VERSION = {"ascend910b": "Ascend910B2"}


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


def emit_project(kernel: Kernel, out_dir: Path, *, tiling: dict | None = None,
                 verify: bool = True) -> EmittedProject:
    """Write the AscendC project for ``kernel`` into ``out_dir`` and return its file paths.

    ``verify=False`` skips the IR verifier (for tests that hand the C++ runtime a kernel that
    breaks the contract on purpose, to see the runtime refuse it); the printers trust it."""
    if verify:
        verify_ir(kernel, planned=True)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
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
                          cpu_defines=_cpu_defines(kernel.target, _scopes(kernel)), **paths)


def _scopes(k: Kernel) -> frozenset[Scope]:
    return frozenset(b.scope for b in k.buffers)


def _cpu_defines(t: Target, used: frozenset[Scope] = frozenset()) -> tuple[str, ...]:
    """The target's numbers for the CPU runtime; the bias table's only when ``used`` (the
    runtime's default 0 makes any access to it fail)."""
    ub = t.scope(Scope.UB)
    cube = tuple(f"-DASCENDSCHED_{s.value}_USABLE={t.scope(s).usable}"
                 for s in (Scope.L1, Scope.L0A, Scope.L0B, Scope.L0C)
                 + ((Scope.BT,) if Scope.BT in used else ()))
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


# --------------------------------------------------------------------------- host conversions
def _host_params(k: Kernel) -> list[GmTensor]:
    return [p for p in k.params if p.host is not None]


def _trans_quant_param() -> str:
    """C++ of the host conversion of a float32 scale into Fixpipe quant words, the one of
    ``lower/fixpipe_quant.py`` (same constants)."""
    return f"""
// Fixpipe per-channel quant words from a float32 scale, as aclnnTransQuantParam makes them
// (hicann/ops-nn quant/trans_quant_param/docs/aclnnTransQuantParam.md): the scale's bits with
// the low 13 mantissa bits cleared (the Fixpipe multiplies by (1, 8, 10) floats: asc-devkit
// docs/zh/api/SIMD-API/基础API/矩阵计算（ISASI）/矩阵搬出关键特性说明/随路量化.md 表1) and bit
// 46 set; the words past n stay 0 (whole 128 B, as the Fixpipe copies them from L1).
static std::vector<uint8_t> TransQuantParam(const std::vector<uint8_t>& scale, size_t n, size_t words) {{
    std::vector<uint8_t> out(words * sizeof(uint64_t), 0);
    for (size_t i = 0; i < n; ++i) {{
        uint32_t bits = 0;
        std::memcpy(&bits, scale.data() + i * sizeof(float), sizeof(bits));
        const uint64_t word = (static_cast<uint64_t>(bits) & 0x{M1_MASK:X}ull) | (1ull << {SIGN_BIT.bit_length() - 1});
        std::memcpy(out.data() + i * sizeof(uint64_t), &word, sizeof(word));
    }}
    return out;
}}"""


def _host_helpers(k: Kernel, acl: bool) -> str:
    if not _host_params(k):
        return ""
    text = "\n\n#include <cstring>\n" + _trans_quant_param()
    if acl:
        text += """

// The kernel reads Fixpipe quant words, not the user's float32 scale: convert before launch.
static void CopyQuantFileToDevice(const char* path, size_t n, void* device, size_t words) {
    std::vector<uint8_t> scale(n * sizeof(float));
    std::FILE* f = std::fopen(path, "rb");
    if (!f || std::fread(scale.data(), 1, scale.size(), f) != scale.size()) {
        std::fprintf(stderr, "cannot read %zu bytes from %s\\n", scale.size(), path);
        std::exit(1);
    }
    std::fclose(f);
    std::vector<uint8_t> host = TransQuantParam(scale, n, words);
    CHECK_ACL(aclrtMemcpy(device, host.size(), host.data(), host.size(), ACL_MEMCPY_HOST_TO_DEVICE));
}"""
    return text


def _host_note(k: Kernel) -> str:
    ps = _host_params(k)
    if not ps:
        return ""
    names = ", ".join(f"`{p.name}`" for p in ps)
    return ("\n\nHost-converted inputs: " + names + " is given as the user's float32 scale "
            "(`input/<param>.bin`, one float per output column); `main.cpp` and `cpu_main.cpp` "
            "convert it before launch into the Fixpipe's uint64 quant words (`TransQuantParam`, "
            "as aclnnTransQuantParam / torch_npu.npu_trans_quant_param do: the scale keeps 10 "
            "mantissa bits), which the kernel reads (Fixpipe VDEQF16).")


def _host_vars(k: Kernel, fields: list[tuple[str, int]]) -> dict[str, str]:
    args, _ws = _io_params(k)
    decl, h2d, d2h, free = [], [], [], []
    for p in args:
        n = _ident(p.name)
        decl.append(f"    const size_t {n}Bytes = {p.nbytes};\n"
                    f"    void* {n}Device = nullptr;\n"
                    f"    CHECK_ACL(aclrtMalloc(&{n}Device, {n}Bytes, ACL_MEM_MALLOC_HUGE_FIRST));")
        if p.host is not None:  # the user's float32 scale -> quant words (fixpipe_quant)
            h2d.append(f"    CopyQuantFileToDevice(\"./input/{p.name}.bin\", {p.host.shape[0]}, "
                       f"{n}Device, {p.elems});")
        elif p.kind == "input":
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
        "host_helpers": _host_helpers(k, acl=True),
    }


def _cmake_vars(k: Kernel) -> dict[str, str]:
    return {"name": k.name, "kernel_fn": c_name(k.name),
            "soc_version": _SOC_VERSION.get(k.target.name, "Ascend910B2"),
            "target": k.target.name, "npu_arch": k.target.npu_arch,
            "extra_libs": "    runtime  # rtGetC2cCtrlAddr (cross-core flags)\n" if _uses_ffts(k)
            else "", "cores_note": _cores_note(k), "host_note": _host_note(k)}


def _cores_note(k: Kernel) -> str:
    cores = _cores(k)
    if cores == (CoreType.AIC,):
        return (f"Cube only (`KERNEL_TYPE_AIC_ONLY`): blockDim = {k.block_dim} launches "
                f"{k.block_dim} Cube cores (the 910B2 has {k.target.num_aic}).")
    if cores == (CoreType.AIC, CoreType.AIV):
        two = k.sub_blocks == 2
        return (f"mix (`KERNEL_TYPE_MIX_AIC_1_{2 if two else 1}`): each of the blockDim blocks "
                "runs one Cube and " + ("two Vector cores (each half of every tile's rows, "
                                        "`GetSubBlockIdx()`)" if two else "one Vector core") + ("; the kernel's first argument is the FFTS base address "
                                 "(`rtGetC2cCtrlAddr`) for its cross-core flags." if _uses_ffts(k)
                                 else "."))
    return (f"Vector only (`KERNEL_TYPE_AIV_ONLY`): blockDim = {k.block_dim} Vector cores.")


def _cpu_main(k: Kernel, fields: list[tuple[str, int]]) -> str:
    args, _ws = _io_params(k)
    defines = "\n".join("#define " + d[2:].replace("=", " ", 1) for d in _cpu_defines(k.target, _scopes(k)))
    setup, call, outs = [], [], []
    for p in args:
        n = _ident(p.name)
        if p.host is not None:  # the user's float32 scale, converted as main.cpp does
            user = p.host.shape[0]
            setup.append(f"    std::vector<uint8_t> {n} = TransQuantParam(read_file(in_dir + \"/{p.name}.bin\", "
                         f"{user * p.host.dtype.bytes}), {user}, {p.elems});")
        elif p.kind == "input":
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
        "sub_arg": f", {k.sub_blocks}" if k.sub_blocks > 1 else "",
        "host_helpers": _host_helpers(k, acl=False),
    })


def copy_runtime(dst: Path) -> None:
    """Copy the CPU runtime headers next to a project (for building it elsewhere)."""
    for f in RUNTIME_DIR.iterdir():
        if f.suffix in (".h", ".hpp"):
            shutil.copy2(f, Path(dst) / f.name)
