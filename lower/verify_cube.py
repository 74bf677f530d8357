"""The IR contract of the Cube (AIC) ops, for ``lower/verify.py``: each op's attrs are exactly
its AscendC parameter struct, in the documented ranges of ``kernel.target.cube_param_ranges``;
its regions sit in the op's scopes, start on the scope's alignment and equal the footprint the
params imply (``cube_ops.cube_footprints``, in the target's fractal geometry); no element is
written twice; dtypes, modes and fixed values are the modelled ones (lower/cube_ops.py)."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ascendsched.lower.affine import Cond
from ascendsched.lower.cube_ops import (
    CUBE_PARAMS,
    CUBE_PIPES,
    CUBE_SCOPES,
    FIXPIPE_QUANT,
    FIXPIPE_VQUANT,
    MMAD_DTYPES,
    MMAD_OPS,
    cube_footprints,
    squeeze_dims,
)
from ascendsched.lower.ir import AttrValue, Dim
from ascendsched.lower.verify_site import OpRule, Site, aligned
from ascendsched.target.model import Scope

_BOOL_PARAMS = frozenset(["ifTranspose", "kDirectionAlign", "cmatrixSource", "reluEn"])


def params(site: Site) -> dict[str, AttrValue]:
    """The API parameters of a cube instruction by name, each checked: all of
    ``CUBE_PARAMS[op]`` and nothing else, bools where the struct has bools, quantPre one of
    ``FIXPIPE_QUANT``, integers in ``kernel.target.cube_param_ranges[op]``."""
    ins = site.ins
    names = CUBE_PARAMS[ins.op]
    got = dict(ins.attrs)
    missing = [n for n in names if n not in got]
    extra = [n for n in got if n not in names]
    if missing or extra:
        raise site.fail("params", f"{ins.op} attrs must be exactly {', '.join(names)}"
                        + (f"; missing {missing}" if missing else "")
                        + (f"; unknown {extra}" if extra else ""))
    for name in names:
        v = got[name]
        if name in _BOOL_PARAMS and not isinstance(v, bool):
            raise site.fail("params", f"{ins.op} {name}={v!r} must be a bool")
        if name == "cmatrixInitVal" and not isinstance(v, (bool, Cond)):
            raise site.fail("params", f"cmatrixInitVal={v!r} must be a bool or a Cond")
        modes = FIXPIPE_VQUANT if ins.op == "fixpipe_quant" else FIXPIPE_QUANT
        if name == "quantPre" and v not in modes:
            raise site.fail("params", f"{ins.op} quantPre={v!r}; one of {', '.join(modes)}"
                            + (" (a per-channel mode reads a quant tensor: fixpipe_quant)"
                               if v in FIXPIPE_VQUANT else ""))
    for name, (lo, hi) in site.kernel.target.cube_param_ranges.get(ins.op, {}).items():
        v = got[name]
        if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
            raise site.fail("params", f"{ins.op} {name}={v!r} outside the documented range "
                                      f"[{lo}, {hi}]")
    return got


def _check(site: Site) -> None:
    ins, k = site.ins, site.kernel
    p = params(site)
    regions = ins.writes + ins.reads
    dtypes = tuple(k.dtype_of(r.tensor) for r in regions)
    for j, (r, scope) in enumerate(zip(regions, CUBE_SCOPES[ins.op], strict=True)):
        role = "dst" if j == 0 else f"src{j - 1}" if len(regions) > 2 else "src"
        if k.scope_of(r.tensor) != scope:
            raise site.fail("scope", f"{role} {r.tensor} is in {k.scope_of(r.tensor)}; "
                                     f"{ins.op} needs {scope}")
        if scope != Scope.GM:
            align = k.target.scope(scope).alignment
            if not aligned(site, r, align):
                raise site.fail("alignment", f"{role} {r.tensor} starts at element offset "
                                             f"{r.offset}, not {align}-byte aligned in {scope}")
    for r, box in zip(regions, cube_footprints(ins.op, p, dtypes, k.target), strict=True):
        if squeeze_dims(r.dims) != squeeze_dims(box):
            want = ", ".join(f"{d.extent}:{d.stride}" for d in box)
            raise site.fail("footprint", f"region {r} does not match the params' footprint "
                                         f"[{want}] (build cube instructions with "
                                         "cube_ops.make_cube_instr)")
    if ins.op not in MMAD_OPS and not _injective(squeeze_dims(ins.writes[0].dims)):
        raise site.fail("overlap", f"dst {ins.writes[0].tensor}: the instruction writes some "
                                   "elements twice (overlapping destination; the hardware "
                                   "leaves the order undefined)")
    _OWN[ins.op](site, p, dtypes)


def _injective(dims: tuple[Dim, ...]) -> bool:
    """Whether the box's element offsets are all different: a mixed radix (each stride past
    the span of the smaller ones) is; otherwise enumerate them."""
    span = 0
    for d in sorted(dims, key=lambda d: abs(d.stride)):
        if abs(d.stride) <= span:
            return _distinct(dims)
        span += (d.extent - 1) * abs(d.stride)
    return True


@lru_cache(maxsize=256)
def _distinct(dims: tuple[Dim, ...]) -> bool:
    idx = np.zeros(1, dtype=np.int64)
    for d in dims:
        idx = (idx[:, None] + np.arange(d.extent, dtype=np.int64)[None, :] * d.stride).ravel()
    idx = np.sort(idx)  # not np.unique: its first call imports numpy.ma (14 ms)
    return bool((idx[1:] != idx[:-1]).all())


def _same_dtype(site: Site, p: dict, dtypes: tuple) -> None:
    if dtypes[0] != dtypes[1]:
        raise site.fail("dtype", f"{site.ins.op} does not convert: {dtypes[1]} -> {dtypes[0]}")


def _load2d(site: Site, p: dict, dtypes: tuple) -> None:
    _same_dtype(site, p, dtypes)
    if p["ifTranspose"] and dtypes[0].bytes != 2:
        raise site.fail("params", f"ifTranspose supports 16-bit types only, not {dtypes[0]} "
                                  "(use load_l0b_transpose / LoadDataWithTranspose)")


def _load_transpose(site: Site, p: dict, dtypes: tuple) -> None:
    _same_dtype(site, p, dtypes)
    if dtypes[0].bytes not in (1, 2):
        raise site.fail("dtype", f"LoadDataWithTranspose of {dtypes[0]} is not modelled")


def _mmad(site: Site, p: dict, dtypes: tuple) -> None:
    if p["m"] == 1:
        raise site.fail("params", "Mmad with m == 1 switches the cube to GEMV mode (A read as "
                                  "ND, Mmad.md); pad m to 16 rows")
    bias = site.ins.op == "mmad_bias"
    if p["kDirectionAlign"] is not False:
        raise site.fail("params", f"kDirectionAlign={p['kDirectionAlign']!r}: only False is "
                                  "modelled")
    if p["cmatrixSource"] is not bias:
        raise site.fail("params", f"cmatrixSource={p['cmatrixSource']!r}: "
                        + ("Mmad with a bias in the bias table initialises C from it (True)"
                           if bias else "only False is modelled (C from the bias table is "
                                        "mmad_bias)"))
    if bias and p["cmatrixInitVal"] is not False:
        raise site.fail("params", f"cmatrixInitVal={p['cmatrixInitVal']!r}: Mmad with a bias "
                                  "needs False (True clears C instead of loading the bias)")
    c, a, b = (d.name for d in dtypes[:3])
    if MMAD_DTYPES.get((a, b)) != c:
        ok = ", ".join(f"{x} x {y} -> {z}" for (x, y), z in MMAD_DTYPES.items())
        raise site.fail("dtype", f"Mmad {a} x {b} -> {c} is not supported ({ok})")
    if bias and dtypes[3].name != c:
        raise site.fail("dtype", f"Mmad bias is {dtypes[3]}; the bias of a {c} result is {c} "
                                 "(Mmad.md 表8)")


def _copy_l1_bt(site: Site, p: dict, dtypes: tuple) -> None:
    _same_dtype(site, p, dtypes)
    if dtypes[0].name not in ("float32", "int32"):
        raise site.fail("dtype", f"the bias table holds float32 or int32, not {dtypes[0]}")


def _fixpipe(site: Site, p: dict, dtypes: tuple) -> None:
    quant = p["quantPre"]
    srcs, dsts = (x.split("|") for x in FIXPIPE_QUANT[quant])
    dd, sd = (d.name for d in dtypes)
    if sd not in srcs or dd not in dsts or (quant == "NoQuant" and sd != dd):
        raise site.fail("dtype", f"quantPre={quant} does not convert {sd} -> {dd}")


def _copy_gm_l1_cont(site: Site, p: dict, dtypes: tuple) -> None:
    _same_dtype(site, p, dtypes)
    nbytes = p["count"] * dtypes[0].bytes
    block = site.kernel.target.block_bytes
    if nbytes % block:
        raise site.fail("params", f"DataCopy count {p['count']} moves {nbytes} B, not a "
                                  f"multiple of {block} B (the hardware rounds down); copy "
                                  "whole blocks")


def _fixpipe_quant(site: Site, p: dict, dtypes: tuple) -> None:
    dd, sd, qd = (d.name for d in dtypes)
    want = FIXPIPE_VQUANT[p["quantPre"]]
    if (sd, dd) != want:
        raise site.fail("dtype", f"quantPre={p['quantPre']} converts {want[0]} -> {want[1]}, "
                                 f"not {sd} -> {dd}")
    if qd != "uint64":
        raise site.fail("dtype", f"the quant tensor is {qd}; Fixpipe's cbufWorkspace is a "
                                 "LocalTensor<uint64_t> (Fixpipe（L0C到GM数据搬运）.md)")


_OWN = {"copy_gm_l1": _same_dtype, "copy_gm_l1_cont": _copy_gm_l1_cont,
        "fixpipe_quant": _fixpipe_quant, "load_l0a": _load2d, "load_l0b": _load2d,
        "load_l0a_transpose": _load_transpose, "load_l0b_transpose": _load_transpose,
        "mmad": _mmad, "mmad_bias": _mmad, "copy_l1_bt": _copy_l1_bt, "fixpipe": _fixpipe}
CUBE_CHECKS: dict[str, OpRule] = {
    op: OpRule(CUBE_PIPES[op], 1, len(CUBE_SCOPES[op]) - 1, _check, params) for op in _OWN}
