"""The CPU runtime's Cube calls against numpy layout math (one g++ build, many runs).

A small C++ program drives DataCopy(Nd2NzParams), LoadData(LoadData2DParams),
LoadDataWithTranspose, Mmad and Fixpipe<CFG_ROW_MAJOR> directly, dumps L1/L0A/L0B/L0C and the
GM output, and each test recomputes the expected bytes from the layout formulas of the draft
cube contract (nz / zz / zn / L0C nz) with numpy. Abort cases run the same binary with another
case name and check the runtime's message.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ascendsched.dtypes import bf16_bits, from_bf16_bits
from ascendsched.emit_ascendc.check import build_source
from ascendsched.emit_ascendc.project import _cpu_defines
from ascendsched.sim.trace import Trace
from ascendsched.target import DEFAULT_TARGET

pytestmark = pytest.mark.slow  # g++ builds and runs

HARNESS = Path(__file__).with_name("cube_unit.cpp")  # the C++ driver


def _defines() -> tuple[str, ...]:
    return _cpu_defines(DEFAULT_TARGET)  # the target macros every emitted project gets


@pytest.fixture(scope="module")
def harness(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("cube_rt") / "cube_unit.cpp"
    src.write_text(HARNESS.read_text())
    return build_source("cube_unit", src, defines=_defines())


def _run(binary: Path, case: str, d: Path, inputs: dict[str, np.ndarray],
         args: tuple[int, ...] = ()) -> subprocess.CompletedProcess:
    for name, arr in inputs.items():
        (d / f"{name}.bin").write_bytes(np.ascontiguousarray(arr).tobytes())
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0:abort_on_error=1")
    return subprocess.run([str(binary), case, str(d), *map(str, args)], capture_output=True,
                          text=True, env=env, timeout=120)


def _mem(d: Path, name: str, dtype) -> np.ndarray:
    return np.frombuffer((d / f"{name}.bin").read_bytes(), dtype=dtype)


# ----------------------------------------------------------------------------- layout math
C0 = {1: 32, 2: 16, 4: 8}


def nz(x: np.ndarray, rows_p: int) -> np.ndarray:
    """L1 image of Nd2Nz with dstNzC0Stride = rows_p, dstNzNStride = 1; None where unwritten."""
    r, c = x.shape
    c0 = C0[x.itemsize]
    cp = -(-c // c0) * c0
    out = np.full(rows_p * cp, np.nan, dtype=object)
    for i in range(r):
        for j in range(cp):
            out[(j // c0) * rows_p * c0 + i * c0 + j % c0] = x[i, j] if j < c else 0
    return out


def zz(x: np.ndarray) -> np.ndarray:
    """L0A Zz image of a padded (Mp, Kp) matrix."""
    mp, kp = x.shape
    c0 = C0[x.itemsize]
    out = np.empty(mp * kp, dtype=x.dtype)
    for r in range(mp):
        for c in range(kp):
            out[((r // 16) * (kp // c0) + c // c0) * 16 * c0 + (r % 16) * c0 + c % c0] = x[r, c]
    return out


def zn(x: np.ndarray) -> np.ndarray:
    """L0B Zn image of a padded (Kp, Np) matrix."""
    kp, np_ = x.shape
    c0 = C0[x.itemsize]
    out = np.empty(kp * np_, dtype=x.dtype)
    for k in range(kp):
        for n in range(np_):
            out[((k // c0) * (np_ // 16) + n // 16) * 16 * c0 + (n % 16) * c0 + k % c0] = x[k, n]
    return out


def l0c_nz(c: np.ndarray, mp: int, np_: int) -> np.ndarray:
    out = np.empty(mp * np_, dtype=c.dtype)
    for m in range(mp):
        for n in range(np_):
            out[(n // 16) * mp * 16 + m * 16 + n % 16] = c[m, n]
    return out


def _check_nz(l1: np.ndarray, expect: np.ndarray, poison) -> None:
    got = l1[:expect.size]
    written = np.array([not (isinstance(v, float) and np.isnan(v)) for v in expect])
    np.testing.assert_array_equal(got[written], expect[written].astype(got.dtype))
    assert (got.view(np.uint8 if got.itemsize == 1 else f"u{got.itemsize}")[~written]
            == poison).all(), "rows Nd2Nz does not write keep the 0xFF poison"


def _pad(x: np.ndarray, rows: int, cols: int) -> np.ndarray:
    out = np.zeros((rows, cols), dtype=x.dtype)
    out[:x.shape[0], :x.shape[1]] = x
    return out


# ----------------------------------------------------------------------------- tests
def test_gemm_fp16_layouts_numbers_and_trace(harness, tmp_path):
    r = np.random.default_rng(1)
    a = r.standard_normal((20, 40)).astype(np.float16)
    b = r.standard_normal((40, 24)).astype(np.float16)
    p = _run(harness, "gemm_f16", tmp_path, {"a": a, "b": b})
    assert p.returncode == 0, p.stderr
    l1 = _mem(tmp_path, "l1", np.float16)
    _check_nz(l1, nz(a, 32), 0xFFFF)                        # A: Rp = 32, 3 column blocks
    _check_nz(l1[2048:], nz(b, 48), 0xFFFF)                 # B at 4096 B: Rp = 48
    # L0A = zz of A padded to (32, 48); pad rows 20..31 are L1 poison (NaN), pad cols are 0
    a_pad = _pad(a, 32, 48)
    l0a = _mem(tmp_path, "l0a", np.float16)[:32 * 48]
    want = zz(a_pad)
    rows_valid = zz(_pad(np.ones((20, 48), np.float16), 32, 48)).astype(bool)
    np.testing.assert_array_equal(l0a[rows_valid], want[rows_valid])
    assert np.isnan(l0a[~rows_valid]).all()
    # L0B = zn of B padded to (48, 32): rows 40..47 are L1 poison
    l0b = _mem(tmp_path, "l0b", np.float16)[:48 * 32]
    b_rows = zn(_pad(np.ones((40, 32), np.float16), 48, 32)).astype(bool)
    np.testing.assert_array_equal(l0b[b_rows], zn(_pad(b, 48, 32))[b_rows])
    # L0C: valid 20 x 24 products, pad elements of the 2 x 2 fractals poisoned
    ref = a.astype(np.float64) @ b.astype(np.float64)
    l0c = _mem(tmp_path, "l0c", np.float32)[:32 * 32]
    full = np.full((32, 32), np.nan, np.float32)
    full[:20, :24] = ref
    img = l0c_nz(full, 32, 32)
    np.testing.assert_allclose(l0c[~np.isnan(img)], img[~np.isnan(img)], rtol=1e-6)
    assert np.isnan(l0c[np.isnan(img)]).all()
    c = _mem(tmp_path, "c", np.float16).reshape(20, 24)
    np.testing.assert_array_equal(c, ref.astype(np.float32).astype(np.float16))
    # trace: one event per call, exact byte ranges
    ev = Trace.from_jsonl((tmp_path / "trace.jsonl").read_text()).events
    assert [e.op for e in ev] == (["copy_gm_l1"] * 2 + ["set_flag", "wait_flag"] + ["load_l0a"] * 2
                                  + ["load_l0b"] * 3 + ["set_flag", "wait_flag", "mmad", "set_flag",
                                                        "wait_flag", "fixpipe", "barrier"])
    assert all(e.core == "AIC" for e in ev)
    cp_a, cp_b = ev[0], ev[1]
    assert cp_a.pipe == "MTE2" and cp_a.reads == (("GM:a", 0, 1600),)
    # 20 rows x 3 blocks of 32 B at (block * 32 + row) * 32: rows 0..19 of each 1 KB column block
    assert cp_a.writes == tuple(("L1", blk * 1024, blk * 1024 + 640) for blk in range(3))
    assert cp_b.writes == (("L1", 4096, 4096 + 1280), ("L1", 4096 + 1536, 4096 + 1536 + 1280))
    la = ev[4]
    assert la.pipe == "MTE1" and la.writes == (("L0A", 0, 1536),)
    assert la.reads == (("L1", 0, 512), ("L1", 1024, 1536), ("L1", 2048, 2560))
    mm = next(e for e in ev if e.op == "mmad")
    assert mm.pipe == "M" and mm.writes == (("L0C", 0, 4096),)
    assert mm.reads == (("L0A", 0, 3072), ("L0B", 0, 3072))
    fx = next(e for e in ev if e.op == "fixpipe")
    assert fx.pipe == "FIX" and fx.writes == (("GM:c", 0, 960),)
    # L0C reads: whole 16-element row blocks, rows 0..19 of both N-fractal columns, the
    # second one Mp * 16 elements = 2 KB further
    assert fx.reads == (("L0C", 0, 1280), ("L0C", 2048, 2048 + 1280))
    sets = [e for e in ev if e.op == "set_flag"]
    assert [(e.src, e.dst) for e in sets] == [("MTE2", "MTE1"), ("MTE1", "M"), ("M", "FIX")]


def test_gemm_int8_with_transposed_squares(harness, tmp_path):
    r = np.random.default_rng(2)
    a = r.integers(-128, 128, (18, 70)).astype(np.int8)
    b = r.integers(-128, 128, (70, 40)).astype(np.int8)
    p = _run(harness, "gemm_i8", tmp_path, {"a": a, "b": b})
    assert p.returncode == 0, p.stderr
    # L0B = zn (C0 = 32 along K) of B padded to (96, 64); K rows 70..95 are L1 poison (-1)
    l0b = _mem(tmp_path, "l0b", np.int8)[:96 * 64]
    valid = zn(_pad(np.ones((70, 64), np.int8), 96, 64)).astype(bool)
    np.testing.assert_array_equal(l0b[valid], zn(_pad(b, 96, 64))[valid])
    assert (l0b[~valid] == -1).all()
    c = _mem(tmp_path, "c", np.int32).reshape(18, 40)
    np.testing.assert_array_equal(c, a.astype(np.int32) @ b.astype(np.int32))
    ev = Trace.from_jsonl((tmp_path / "trace.jsonl").read_text()).events
    tr = [e for e in ev if e.op == "load_l0b_transpose"]
    assert len(tr) == 3 and tr[0].pipe == "MTE1"
    # k block 0: squares (n block pair 0, 1) at L1 4096 + 0 and + 3 KB; L0B fractals 0..3
    assert tr[0].reads == (("L1", 4096, 5120), ("L1", 4096 + 3072, 4096 + 4096))
    assert tr[0].writes == (("L0B", 0, 2048),)


def test_gemm_fp32_b_transposed_relu(harness, tmp_path):
    r = np.random.default_rng(3)
    a = r.standard_normal((17, 20)).astype(np.float32)
    bt = r.standard_normal((12, 20)).astype(np.float32)
    p = _run(harness, "gemm_f32_tb", tmp_path, {"a": a, "b": bt})
    assert p.returncode == 0, p.stderr
    c = _mem(tmp_path, "c", np.float32).reshape(17, 12)
    ref = np.maximum(a.astype(np.float64) @ bt.T.astype(np.float64), 0)
    np.testing.assert_allclose(c, ref, rtol=1e-6, atol=1e-6)
    # L0B holds Zn of B = bt.T with C0 = 8 along K (the bytes of L1's nz of bt); N rows
    # 12..15 were never written by Nd2Nz and keep the poison
    l0b = _mem(tmp_path, "l0b", np.float32)[:24 * 16]
    valid = zn(_pad(np.ones((24, 12), np.float32), 24, 16)).astype(bool)
    np.testing.assert_array_equal(l0b[valid], zn(_pad(bt.T.copy(), 24, 16))[valid])
    assert np.isnan(l0b[~valid]).all()


def test_gemm_bf16_accumulates_over_k(harness, tmp_path):
    r = np.random.default_rng(4)
    a = from_bf16_bits(bf16_bits(r.standard_normal((32, 64)).astype(np.float32)))
    b = from_bf16_bits(bf16_bits(r.standard_normal((64, 32)).astype(np.float32)))
    p = _run(harness, "gemm_bf16_acc", tmp_path, {"a": bf16_bits(a), "b": bf16_bits(b)})
    assert p.returncode == 0, p.stderr
    c = from_bf16_bits(_mem(tmp_path, "c", np.uint16)).reshape(32, 32)
    # each Mmad's k-sum rounds to fp32 once, the accumulation adds in fp32
    half1 = (a[:, :32].astype(np.float64) @ b[:32].astype(np.float64)).astype(np.float32)
    half2 = (a[:, 32:].astype(np.float64) @ b[32:].astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(c, from_bf16_bits(bf16_bits(half1 + half2)))
    mm = [e for e in Trace.from_jsonl((tmp_path / "trace.jsonl").read_text()).events
          if e.op == "mmad"]
    assert mm[0].reads == (("L0A", 0, 2048), ("L0B", 0, 2048))          # init: C not read
    assert ("L0C", 0, 4096) in mm[1].reads                                # accumulate: C read


@pytest.mark.parametrize("case, message", [
    ("gemv", r"Mmad: m == 1 switches the Cube into GEMV mode"),
    ("mmad_k_4096", r"Mmad: k = 4096 is outside \[1, 4095\]"),
    ("l0a_misaligned", r"LoadData\(LoadData2DParams\): dst starts at L0A address 256, which is not "
                       r"512-byte aligned"),
    ("repeat_0", r"repeatTimes = 0 is outside \[1, 255\] \(0 makes the load a NOP\)"),
    ("nd2nz_overlap", r"is written twice: Nd2Nz destinations must not overlap"),
    ("l1_out_of_bounds", r"L1 access \[\d+, \d+\) is outside the usable L1"),
    ("fixpipe_rows_overlap", r"Fixpipe: dstStride 16 < nSize 32"),
    ("fixpipe_quant_mismatch", r"float -> half needs quantPre F322F16, got mode 0"),
    ("transpose_b32_loaddata", r"ifTranspose needs b16 data, got float"),
    ("aiv_event_on_aic", r"SetFlag<HardEvent::MTE2_V>: this event does not exist on the AIC"),
    ("ub_on_aic", r"TPipe::InitBuffer: UB does not exist on the AIC"),
    ("mmad_operand_in_l1", r"Mmad: fm is a LocalTensor in L1, but must be in L0A \(TPosition A2\)"),
    ("vector_on_l1", r"Add: dst is a LocalTensor in L1: vector instructions and GM<->UB copies work on UB"),
    ("gm_copy_into_l0a", r"DataCopy: dst is a LocalTensor in L0A; this DataCopy overload moves GM <-> UB"),
    ("pipe_v_barrier_on_aic", r"PipeBarrier<PIPE_V>: the AIC has no V pipe"),
])
def test_documented_rules_abort(harness, tmp_path, case, message):
    p = _run(harness, case, tmp_path, {})
    assert p.returncode != 0
    assert "ascendsched CPU runtime" in p.stderr
    import re
    assert re.search(message, p.stderr), p.stderr


def test_mmad_over_never_loaded_rows_aborts(harness, tmp_path):
    # docs Mmad.md:329 (NaN inputs may raise an execution error), 285-287 (the rest of a
    # fractal is ignored): m of the valid 40 rows runs; m = 48 reads 8 rows no copy wrote
    p = _run(harness, "mmad_m40", tmp_path, {})
    assert p.returncode == 0, p.stderr
    p = _run(harness, "mmad_m48", tmp_path, {})
    assert p.returncode != 0
    assert re.search(r"Mmad reads L0A A element \(row, k\) \(40, 0\) at 1280, which no copy or "
                     r"load wrote", p.stderr), p.stderr


def test_trace_is_valid_jsonl(harness, tmp_path):
    r = np.random.default_rng(5)
    p = _run(harness, "gemm_f16", tmp_path, {"a": r.standard_normal((20, 40)).astype(np.float16),
                                             "b": r.standard_normal((40, 24)).astype(np.float16)})
    assert p.returncode == 0
    for line in (tmp_path / "trace.jsonl").read_text().splitlines():
        d = json.loads(line)
        assert d["block"] == 0 and d["core"] == "AIC"


def test_load_with_transpose_b32_square(harness, tmp_path):
    x = np.arange(256, dtype=np.float32).reshape(16, 16)
    p = _run(harness, "transpose_b32", tmp_path, {"a": x})
    assert p.returncode == 0, p.stderr
    l0b = _mem(tmp_path, "l0b", np.float32)
    # the square is [F0 | F1] = X; its transpose splits into two 16x8 fractals
    np.testing.assert_array_equal(l0b[:128].reshape(16, 8), x.T[:, :8])
    np.testing.assert_array_equal(l0b[128:256].reshape(16, 8), x.T[:, 8:])
    ev = Trace.from_jsonl((tmp_path / "trace.jsonl").read_text()).events
    assert ev[-1].op == "load_l0b_transpose" and ev[-1].writes == (("L0B", 0, 1024),)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(m=st.integers(1, 128), k=st.integers(1, 128), n=st.integers(1, 128),
       seed=st.integers(0, 2**16))
def test_random_shapes_equal_numpy(harness, tmp_path_factory, m, k, n, seed):
    """Any fp16 shape up to 128 through Nd2Nz, LoadData (A plain, B transposed), Mmad and
    Fixpipe F322F16, with the recipe of lower/cube_ops.py: bit-equal to numpy's float64 product
    rounded to fp32 then fp16 (m == 1 runs Mmad with m = 2 over a copied row: never GEMV, and
    never over rows no copy loaded)."""
    d = tmp_path_factory.mktemp("any")
    r = np.random.default_rng(seed)
    a = r.standard_normal((m, k)).astype(np.float16)
    b = r.standard_normal((k, n)).astype(np.float16)
    p = _run(harness, "gemm_any", d, {"a": a, "b": b}, (m, k, n))
    assert p.returncode == 0, p.stderr
    c = _mem(d, "c", np.float16).reshape(m, n)
    ref = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32).astype(np.float16)
    np.testing.assert_array_equal(c, ref)
