"""The happens-before oracle's memo: which syncs ordered each group of items, and which groups a
pruning trial must look at again.

Items (a dependence, or a double-set pair of one flag) are grouped per (source, sink)
statement pair; a group found ordered keeps the syncs its cover used (``_ok``). A trial that
drops syncs re-checks only the groups without a verdict, those whose verdict used a dropped
sync, and those that lose items (the dependences a trial skips, the double sets of dropped
flags), found through indices rather than by walking every group.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any


class GroupVerdicts:
    """Mixin of ``SyncOracle``: needs ``items`` (its checks, each with ``key``, ``src`` and
    ``dst``), ``_ok`` (group key -> syncs that ordered it) and ``_leaning`` (sync key -> group
    keys whose verdict names it)."""

    items: list[Any]
    _ok: dict[tuple, frozenset]
    _leaning: dict[object, set[tuple]]

    @cached_property
    def _all_groups(self) -> list[tuple[list[tuple[int, Any]], frozenset, frozenset,
                                         tuple[int, tuple, list[Any]]]]:
        """The items per (source, sink) statement pair, in order of their first item: (the
        items with their positions, their dependences' indices, their double sets' flag keys,
        the group as ``_to_check`` gives it when none of its items is left out)."""
        groups: dict[tuple[int, int], list[tuple[int, Any]]] = {}
        for n, item in enumerate(self.items):
            groups.setdefault((item.src.id, item.dst.id), []).append((n, item))
        return [(its, frozenset(it.key[1] for _, it in its if it.key[0] == "dep"),
                 frozenset(it.key[1] for _, it in its if it.key[0] == "double set"),
                 (its[0][0], (sid, tid, frozenset(it.key for _, it in its)),
                  [it for _, it in its]))
                for (sid, tid), its in groups.items()]

    @cached_property
    def _group_index(self) -> tuple[dict[int, list[int]], dict[tuple, list[int]],
                                    dict[tuple, int]]:
        """Per dependence index and per flag key, the groups (positions in ``_all_groups``)
        holding an item of it (a dependence, a double set of the flag); each whole group's
        key -> its position."""
        by_dep: dict[int, list[int]] = {}
        by_flag: dict[tuple, list[int]] = {}
        for g, (_, deps, sets, _) in enumerate(self._all_groups):
            for n in deps:
                by_dep.setdefault(n, []).append(g)
            for k in sets:
                by_flag.setdefault(k, []).append(g)
        return by_dep, by_flag, {whole[1]: g for g, (*_, whole) in enumerate(self._all_groups)}

    @cached_property
    def _unsettled(self) -> set[int]:
        """Whole groups (positions) with no verdict in ``_ok`` (kept by ``_verdict`` and
        ``_forget``)."""
        return set(range(len(self._all_groups)))

    def _verdict(self, gkey: tuple, used: frozenset) -> None:
        """Record that the syncs ``used`` order group ``gkey``."""
        self._forget(gkey)
        self._ok[gkey] = used
        for k in used:
            self._leaning.setdefault(k, set()).add(gkey)
        g = self._group_index[2].get(gkey)
        if g is not None:
            self._unsettled.discard(g)

    def _forget(self, gkey: tuple) -> None:
        """Drop group ``gkey``'s verdict."""
        old = self._ok.pop(gkey, None)
        for k in old or ():
            self._leaning[k].discard(gkey)
        g = self._group_index[2].get(gkey)
        if g is not None:
            self._unsettled.add(g)

    def _to_check(self, skip: frozenset[int], dropped: frozenset
                  ) -> list[tuple[tuple, list[Any], frozenset | None]]:
        """(group key, items, verdict) of each group to check without the dependences of
        ``skip`` and the syncs of ``dropped``: no verdict, or one that used a dropped sync; in
        order of their first item. A group loses the dependences of ``skip`` and the double
        sets of the flags in ``dropped`` (its key changes with them). Found from the indices,
        not by walking every group: a pruning trial costs what it touches."""
        by_dep, by_flag, where = self._group_index
        touched: set[int] = set()
        for n in skip:
            touched.update(by_dep.get(n, ()))
        for k in dropped:
            touched.update(by_flag.get(k, ()))
        look = touched | self._unsettled
        for k in dropped:
            look.update(where[g] for g in self._leaning.get(k, ()) if g in where)
        out = []
        for g in sorted(look):
            its, _, _, whole = self._all_groups[g]
            first, gkey, items = whole
            if g in touched:
                kept = [(n, it) for n, it in its
                        if not (it.key[1] in skip if it.key[0] == "dep"
                                else it.key[1] in dropped)]
                if not kept:
                    continue
                first = kept[0][0]
                gkey = (gkey[0], gkey[1], frozenset(it.key for _, it in kept))
                items = [it for _, it in kept]
            used = self._ok.get(gkey)
            if used is None or used & dropped:
                out.append((first, gkey, items, used))
        out.sort(key=lambda x: x[0])
        return [(gkey, items, used) for _, gkey, items, used in out]
