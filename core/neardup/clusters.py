"""Clusters of duplicates: one union-find, and the natural id order that picks each cluster's keeper.

The union-find is compiled (numba) because the LSH kernels call it inside their loops; Python
callers use the same functions (`components`), so every engine forms clusters the same way.
A union makes the smaller root the root of both, so a root is the lowest index of its
cluster whatever order the edges come in, and `roots` settles every element in one pass.

Ids are ordered naturally and deterministically (`id_sort_key`): runs of ASCII digits compare
as numbers, the rest as text, ties broken by plain string order (``"r2" < "r10"``,
``"r01" < "r1"``). Keeping each cluster's lowest id makes a result independent of input order.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np
from numba import njit

_DIGITS = re.compile(r"([0-9]+)")


@njit(cache=True)
def find(parent, x):
    """The root of ``x``, halving the path on the way."""
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


@njit(cache=True, inline="always")
def link(parent, a, b):
    """Join two distinct roots: the smaller one becomes the root of both."""
    parent[max(a, b)] = min(a, b)


@njit(cache=True)
def union_edges(parent, edges):
    """Merge ``edges`` ((m, 2) indices) into the forest ``parent`` in place."""
    for k in range(edges.shape[0]):
        a, b = find(parent, edges[k, 0]), find(parent, edges[k, 1])
        if a != b:
            link(parent, a, b)


@njit(cache=True)
def roots(parent):
    """The root of every element (roots are smaller than their children: one pass settles it)."""
    out = parent.copy()
    for i in range(out.shape[0]):
        out[i] = out[out[i]]
    return out


def components(n: int, edges: np.ndarray) -> np.ndarray:
    """The root (lowest index) of the cluster of each of ``n`` elements joined by ``edges``."""
    parent = np.arange(n, dtype=np.int64)
    union_edges(parent, np.asarray(edges, dtype=np.int64).reshape(-1, 2))
    return roots(parent)


def id_sort_key(id_: str) -> tuple[tuple[str | int, ...], str]:
    """Natural sort key of an id: the order in which the lowest id of a cluster is kept."""
    parts = _DIGITS.split(id_)
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts)), id_


def lowest_ids(root: np.ndarray, ids_of: Callable[[np.ndarray], Sequence[str]]) -> np.ndarray:
    """`representatives` of ``root`` (`roots`' output: a component's root is its lowest index), with
    the ids read (``ids_of(ascending indices)``) only for components of two or more, where there
    is a choice: a corpus is mostly singletons, and sorting every id is what a million rows pay."""
    everyone = np.arange(len(root))
    clustered = np.flatnonzero(root != everyone)
    members = np.union1d(clustered, root[clustered])  # ascending; roots are members too
    if len(members):
        everyone[members] = members[representatives(np.searchsorted(members, root[members]), ids_of(members))]
    return everyone


def representatives(root: np.ndarray, ids: Sequence[str]) -> np.ndarray:
    """For each element, the element of its component with the lowest natural id."""
    rank = np.empty(len(ids), dtype=np.int64)
    rank[sorted(range(len(ids)), key=lambda i: id_sort_key(ids[i]))] = np.arange(len(ids))
    best = np.full(len(ids), len(ids), dtype=np.int64)
    np.minimum.at(best, root, rank)
    by_rank = np.empty(len(ids), dtype=np.int64)
    by_rank[rank] = np.arange(len(ids))
    return by_rank[best[root]]
