"""Where evaluations run: local worker processes (default: every core) or a Ray cluster.

An executor maps a picklable function over items and yields ``(index, result)`` as results
finish; callers that need order sort by index. Which executor ran a sweep never changes its
result: the search asks for fixed-size batches and tells the sampler in index order.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Any, Protocol

from ascendsched.errors import AscendSchedError


class Executor(Protocol):
    jobs: int

    def imap(self, fn: Callable[[Any], Any], items: Sequence[Any]
             ) -> Iterator[tuple[int, Any]]: ...

    def close(self) -> None: ...


def ordered_map(ex: Executor, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
    """``[fn(x) for x in items]`` through ``ex`` (results in the items' order)."""
    out: list[Any] = [None] * len(items)
    for i, r in ex.imap(fn, items):
        out[i] = r
    return out


class LocalExecutor:
    """``jobs`` worker processes (``None``: every core); ``jobs=1`` runs in this process."""

    def __init__(self, jobs: int | None = None) -> None:
        self.jobs = jobs or os.cpu_count() or 1
        self._pool: ProcessPoolExecutor | None = None

    def imap(self, fn: Callable[[Any], Any], items: Sequence[Any]
             ) -> Iterator[tuple[int, Any]]:
        if self.jobs == 1 or len(items) <= 1:
            for i, x in enumerate(items):
                yield i, fn(x)
            return
        if self._pool is None:
            ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
            self._pool = ProcessPoolExecutor(self.jobs, mp_context=ctx)
        futs = {self._pool.submit(fn, x): i for i, x in enumerate(items)}
        pending = set(futs)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in sorted(done, key=futs.__getitem__):
                yield futs[f], f.result()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None


class RayExecutor:
    """Tasks on a Ray cluster (``address``: ``"auto"``, ``"ray://host:10001"``, or ``None``
    to use the Ray instance this process already started). Needs ``ascendsched[ray]``."""

    def __init__(self, address: str | None = None) -> None:
        try:
            import ray
        except ImportError:
            raise AscendSchedError("--ray needs Ray: pip install 'ascendsched[ray]'") from None
        if not ray.is_initialized():
            ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
        self._ray = ray
        self.jobs = max(1, int(ray.cluster_resources().get("CPU", 1)))
        self._remote: dict[Callable, Any] = {}

    def imap(self, fn: Callable[[Any], Any], items: Sequence[Any]
             ) -> Iterator[tuple[int, Any]]:
        ray = self._ray
        remote = self._remote.setdefault(fn, ray.remote(fn))
        refs = {remote.remote(x): i for i, x in enumerate(items)}
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for r in done:
                yield refs[r], ray.get(r)

    def close(self) -> None:
        pass  # the cluster belongs to whoever started it


def make_executor(jobs: int | None = None, ray_address: str | None = None) -> Executor:
    if ray_address is not None:
        return RayExecutor(ray_address)
    return LocalExecutor(jobs)
