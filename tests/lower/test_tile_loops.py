"""The persistent loops over classes of equal tiles (``lower/tile_loops.py``) that both
builders make: every tile of a class runs once, on core ``T % cores``, in the core's order."""

from __future__ import annotations

import itertools

from ascendsched.algo.library import layernorm
from ascendsched.lower.build_loop_nest import build_loop_nest
from ascendsched.lower.ir import BLOCK_IDX, For, If
from ascendsched.lower.tile_loops import class_guard, class_run
from ascendsched.schedule.schedule import Schedule


def test_each_tile_of_a_class_runs_once_on_its_core() -> None:
    """Over classes numbered one after the other, each trip that passes its guard runs a
    tile ``base + tile`` on core ``(base + tile) % cores``, every tile exactly once, and the
    core's running number counts its tiles across the classes in order."""
    for cores, counts in itertools.product((1, 2, 3, 7, 24), ((5,), (1,), (4, 1), (6, 3, 2),
                                                              (24, 1), (48, 7, 1))):
        tiles = sum(counts)
        seen: dict[int, list[int]] = {b: [] for b in range(cores)}
        base = 0
        for n, count in enumerate(counts):
            run = class_run(count, base, cores, tiles, f"t{n}", every_loop=n % 2 == 1)
            conds = class_guard(run, cores)
            for b, trip in itertools.product(range(cores), range(run.iters)):
                env = {BLOCK_IDX: b, f"t{n}": trip}
                if all(c.evaluate(env) for c in conds):
                    tile = base + run.tile(cores).evaluate(env)
                    assert tile % cores == b
                    assert run.run.evaluate(env) == len(seen[b])
                    seen[b].append(tile)
            base += count
        assert sorted(t for ts in seen.values() for t in ts) == list(range(tiles))
        assert all(ts == sorted(ts) for ts in seen.values())


def test_a_one_trip_bound_loop_names_the_cores_that_have_a_tile() -> None:
    """LayerNorm 1000 x 3000 with columns in pieces of 2048 over 2 cores: one full piece (a
    loop of one trip that core 0 runs) and the peeled tail on core 1. Both guards say which
    core, as a GEMM's one-trip tile classes do, not ``j_o_k*2 + block_idx < 1``."""
    s = (Schedule(layernorm(1000, 3000)).split("y", "j", 2048, outer="j_o", inner="j_i")
         .split("y", "i", 2, outer="i_o", inner="i_i").bind("y", "j_o", cores=2)
         .compute_at("xf", "y", "i_o").compute_inline("mean").compute_inline("d")
         .compute_at("var", "y", "i_o").compute_at("r", "y", "i_o"))
    body = build_loop_nest(s).programs[0].body
    loop = next(x for x in body if isinstance(x, For) and x.var == "j_o_k")
    assert loop.extent == 1
    guards = [x for x in loop.body if isinstance(x, If)] + \
        [x for x in body if isinstance(x, If)]
    assert [" and ".join(map(str, g.conds)) for g in guards] == \
        ["block_idx == 0", "block_idx == 1"]
