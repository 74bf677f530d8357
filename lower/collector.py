"""Python's cyclic garbage collector paused while a kernel is lowered.

Lowering allocates some 10^5 short-lived objects and few cycles (recursive closures: 13 k
objects for LayerNorm 16384x256). The collector's full passes scan every object of the
process, most of them the import-time objects of islpy, numpy and sympy (about 68 k: 33 ms a
pass on this machine), and where one fell inside a compile it cost that kernel the pass
(LayerNorm 16384x256: 0.043 s of 0.227 s) while a neighbouring shape paid nothing. Paused, a
lowering pays one young-generation pass at its end (2 ms there), which frees its cycles.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Run the body with the cyclic collector off (as it was, when already off), then collect
    the youngest generation: what the body made and left in cycles."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect(0)
