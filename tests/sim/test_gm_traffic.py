"""The L2 replay's DMA streams against the simulator's own trace, and its LRU on them."""

from __future__ import annotations

import pytest

from ascendsched.algo import library as L
from ascendsched.algo.algorithm import Algorithm
from ascendsched.api.numerics import random_inputs
from ascendsched.lower.ir import Kernel
from ascendsched.lower.pipeline import lower
from ascendsched.lower.schedule_for import schedule_for
from ascendsched.schedule import Schedule
from ascendsched.schedule.gemm import GemmSchedule
from ascendsched.sim.execute import run_kernel
from ascendsched.sim.gm_traffic import dma_streams, gm_traffic

_READS = {"copy_gm_ub", "copy_gm_l1", "copy_gm_l1_cont"}
_WRITES = {"copy_ub_gm", "fixpipe", "fixpipe_quant"}

CASES = {
    # a guarded persistent loop and a tail tile on one core
    "vadd tail": lambda: schedule_for(L.vadd(100_000)),
    # four exclusive tile versions in one fused, core-bound loop (guards on block_idx)
    "bias_add versions": lambda: Schedule(L.bias_add(21, 600)).tile("y", ("i", "j"), (8, 256))
    .reorder("y", "j_o", "i_o").fuse("y", "j_o", "i_o", fused="t").bind("y", "t", 4),
    # tile classes of a GEMM with tails on three cores, K steps in a linear loop
    "gemm classes": lambda: GemmSchedule(L.gemm(300, 500, 200)).tile(64, 128, 64).split_k(32)
    .buffer("l1", 2).bind(3),
    # a mixed kernel: the AIC program, then both AIVs of each block
    "gemm softmax": lambda: schedule_for(L.gemm_softmax(100, 100, 64)),
}


def _traced(k: Kernel, algo: Algorithm) -> list[list[tuple[bool, str, int, int]]]:
    """Per block, the GM DMAs of the IR executor's trace: (write, tensor, first byte, bytes
    touched), the block's programs in the kernel's order (AIC, then each AIV)."""
    trace = run_kernel(k, random_inputs(algo, 0), trace=True).trace
    assert trace is not None
    order = [name for p in k.programs for _, name in k.streams(p.core)]
    per: dict[int, list] = {b: [] for b in range(k.block_dim)}
    for e in sorted(trace.events, key=lambda e: (e.block, order.index(e.core), e.seq)):
        if e.op in _READS or e.op in _WRITES:
            ivs = [i for i in (e.writes if e.op in _WRITES else e.reads)
                   if i[0].startswith("GM:")]
            per[e.block].append((e.op in _WRITES, ivs[0][0][3:], min(lo for _, lo, _ in ivs),
                                 sum(hi - lo for _, lo, hi in ivs)))
    return [per[b] for b in range(k.block_dim)]


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_block_replays_the_dma_instances_the_simulator_runs(name: str) -> None:
    """The replay enumerates all blocks at once (``block_idx`` an array, guards masks): each
    block's stream must be the GM DMAs the IR executor ran on that block, in its order."""
    sched = CASES[name]()
    k = lower(sched)
    got = dma_streams(k)
    want = _traced(k, sched.algo)
    assert [len(s) for s in got] == [len(s) for s in want]
    assert any(len(s) != len(got[0]) for s in got) or name == "gemm softmax"
    for b, (g, w) in enumerate(zip(got, want, strict=True)):
        assert [x[:3] for x in g] == [x[:3] for x in w], b
        assert all(gb >= wb for (*_, gb), (*_, wb) in zip(g, w, strict=True)), b


def _fused_chunked_softmax() -> Schedule:
    """Row statistics in chunk loops with a tail chunk (guards on the chunk variable) inside a
    fused row x column tile loop on 3 cores (a guard mixing the tile variable and block_idx
    with a floor division): the count walks both loops as array axes."""
    return (Schedule(L.softmax(12, 700)).split("y", "i", 4).split("y", "j", 256)
            .fuse("y", "i_o", "j_o", fused="t").bind("y", "t", 3).compute_inline("xf")
            .compute_at("mx", "y", "t").split("mx", "k", 256).compute_inline("e")
            .compute_at("s", "y", "t").split("s", "k2", 256))


@pytest.mark.parametrize("make", [_fused_chunked_softmax, CASES["vadd tail"],
                                  CASES["bias_add versions"], CASES["gemm classes"]])
def test_the_byte_count_takes_guarded_loops_as_array_axes_and_matches_the_executor(
        make, monkeypatch) -> None:  # noqa: ANN001
    """``gm_traffic`` counts bytes and DMA instances with each guarded loop's trips as an array
    axis: the same figures as walking the trips one by one, and as the IR executor's trace."""
    from ascendsched.sim import gm_traffic as g

    sched = make()
    k = lower(sched)
    got = g._count(k)
    want = _traced(k, sched.algo)
    read: dict[str, int] = {}
    written: dict[str, int] = {}
    for stream in want:
        for is_write, tensor, _, nbytes in stream:
            into = written if is_write else read
            into[tensor] = into.get(tensor, 0) + nbytes
    assert got == (read, written, sum(map(len, want)))
    monkeypatch.setattr(g, "_AXIS_CELLS", 0)  # every guarded loop walked trip by trip
    assert g._count(k) == got


def test_an_l2_smaller_than_the_data_evicts_and_writes_back() -> None:
    """Streamed outputs beyond the L2 are written back during the kernel, re-reads within it
    hit; with every tensor inside the L2 nothing is written back."""
    k = lower(schedule_for(L.gemm(1000, 1000, 1000)))
    big = gm_traffic(k, k.target.costs.l2_bytes)
    small = gm_traffic(k, 1 << 20)
    assert big.writeback == 0 and small.writeback > 0
    assert small.hbm_read > big.hbm_read == sum(p.nbytes for p in k.params if p.kind == "input")
    assert 0 < small.hit["A"] < big.hit["A"] < 1
    assert small.instances == big.instances == sum(len(s) for s in dma_streams(k))
