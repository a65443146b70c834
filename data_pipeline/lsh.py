"""The compiled parts of MinHash-LSH clustering: band keys, buckets, exact checks, union-find.

Each function works on one piece of the corpus (one band's keys of one partition, one
bucket group file, one edge file), so the sharded job (`minhash_job.py`) and the in-memory
`dedup.find_duplicates` run the same code, and memory is bounded by the piece.

- **Band keys**: the ``rows`` values of each band of a signature hashed to one uint64
  (xxh64 of their little-endian bytes). Two documents land in one bucket when a band key is
  equal; for distinct bands of ``rows`` values a false collision has probability 2^-64.
- **Groups**: the buckets of one band holding two or more documents, as CSR arrays
  (``offsets``, ``members``; members ascending).
- **Verification** (``exact_check``): inside each group, documents with identical shingle
  sets are merged without a check, then every pair not already connected within the group
  is checked by exact Jaccard of the sorted shingle-hash sets. Skipping connected pairs
  keeps the connected components equal to those of "check every pair", at a fraction of
  the checks on large clusters.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from data_pipeline.minhash import xxh64_words

GroupArrays = tuple[np.ndarray, np.ndarray]  # (offsets, members)


@njit(cache=True)
def band_keys(sigs, bands, rows):
    """(bands, n) uint64: row b holds every document's key of band b (band-major for per-band reads)."""
    n = sigs.shape[0]
    out = np.empty((bands, n), dtype=np.uint64)
    for d in range(n):
        row = sigs[d]
        for b in range(bands):
            out[b, d] = xxh64_words(row, b * rows, rows)
    return out


def groups_of(keys: np.ndarray, docs: np.ndarray) -> GroupArrays:
    """Buckets with >= 2 documents among (key, doc) entries of one band: CSR offsets and members."""
    order = np.lexsort((docs, keys))
    keys, docs = keys[order], docs[order]
    starts = (
        np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1]))) if len(keys) else np.empty(0, int)
    )
    sizes = np.diff(np.append(starts, len(keys)))
    big = sizes > 1
    if not big.any():
        return np.zeros(1, dtype=np.int64), np.empty(0, dtype=np.int64)
    take = np.concatenate([np.arange(s, s + k) for s, k in zip(starts[big], sizes[big], strict=True)])
    offsets = np.concatenate(([0], np.cumsum(sizes[big]))).astype(np.int64)
    return offsets, docs[take].astype(np.int64)


def star_edges(offsets: np.ndarray, members: np.ndarray) -> np.ndarray:
    """(m, 2) edges joining each group's first member to the others: a group is one component."""
    sizes = np.diff(offsets)
    firsts = np.repeat(members[offsets[:-1]], sizes)
    mask = np.ones(len(members), dtype=bool)
    mask[offsets[:-1]] = False
    return np.stack((firsts[mask], members[mask]), axis=1).astype(np.int64)


@njit(cache=True)
def set_fingerprints(set_offsets, set_hashes):
    """A 64-bit fingerprint of each sorted shingle set, so identical sets group without a merge."""
    n = set_offsets.shape[0] - 1
    out = np.empty(n, dtype=np.uint64)
    for i in range(n):
        out[i] = xxh64_words(set_hashes, set_offsets[i], set_offsets[i + 1] - set_offsets[i])
    return out


@njit(cache=True)
def _jaccard_at_least(a, b, threshold):
    """|A ∩ B| / |A ∪ B| >= threshold for sorted unique arrays, stopping once the answer is known."""
    la, lb = a.shape[0], b.shape[0]
    if min(la, lb) < threshold * max(la, lb):  # |A ∩ B| / |A ∪ B| <= min / max
        return False
    # J >= t  <=>  |A ∩ B| >= t (|A| + |B|) / (1 + t)
    need = threshold * (la + lb) / (1.0 + threshold)
    i = j = inter = 0
    while i < la and j < lb:
        if inter >= need:
            return True
        if inter + min(la - i, lb - j) < need:
            return False
        if a[i] == b[j]:
            inter += 1
            i += 1
            j += 1
        elif a[i] < b[j]:
            i += 1
        else:
            j += 1
    return inter >= need


@njit(cache=True)
def _find(parent, x):
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


@njit(cache=True)
def verify_groups(offsets, members, slot, set_offsets, set_hashes, fingerprints, threshold):
    """Accepted edges of every group, plus (checks made, checks rejected).

    ``slot[i]`` is the index of ``members[i]``'s shingle set in (``set_offsets``,
    ``set_hashes``, ``fingerprints``). Members with identical sets join their first such
    member unchecked; the distinct sets are then checked pairwise, skipping pairs already
    connected. At most one edge per member is emitted.
    """
    edges = np.empty((members.shape[0], 2), dtype=np.int64)
    n_edges = checks = rejected = 0
    for g in range(offsets.shape[0] - 1):
        lo, k = offsets[g], offsets[g + 1] - offsets[g]
        order = np.argsort(fingerprints[slot[lo : lo + k]], kind="mergesort")
        distinct = np.empty(k, dtype=np.int64)  # one member per distinct set, in fingerprint order
        n_distinct = 0
        for t in range(k):
            x = order[t]
            sx = slot[lo + x]
            if n_distinct and _same(set_hashes, set_offsets, slot[lo + distinct[n_distinct - 1]], sx):
                edges[n_edges, 0], edges[n_edges, 1] = members[lo + distinct[n_distinct - 1]], members[lo + x]
                n_edges += 1
            else:
                distinct[n_distinct] = x
                n_distinct += 1
        distinct = np.sort(distinct[:n_distinct])
        parent = np.arange(n_distinct)
        for x in range(1, n_distinct):
            sx = slot[lo + distinct[x]]
            a = set_hashes[set_offsets[sx] : set_offsets[sx + 1]]
            for y in range(x):
                rx, ry = _find(parent, x), _find(parent, y)
                if rx == ry:
                    continue
                checks += 1
                sy = slot[lo + distinct[y]]
                if _jaccard_at_least(a, set_hashes[set_offsets[sy] : set_offsets[sy + 1]], threshold):
                    parent[max(rx, ry)] = min(rx, ry)
                    edges[n_edges, 0], edges[n_edges, 1] = (
                        members[lo + distinct[y]],
                        members[lo + distinct[x]],
                    )
                    n_edges += 1
                else:
                    rejected += 1
    return edges[:n_edges], checks, rejected


@njit(cache=True)
def _same(set_hashes, set_offsets, s, t):
    a0, a1, b0, b1 = set_offsets[s], set_offsets[s + 1], set_offsets[t], set_offsets[t + 1]
    if a1 - a0 != b1 - b0:
        return False
    return (set_hashes[a0:a1] == set_hashes[b0:b1]).all()


@njit(cache=True)
def union_edges(parent, edges):
    """Merge ``edges`` into the forest ``parent`` in place; the smaller index becomes the root."""
    for k in range(edges.shape[0]):
        a, b = _find(parent, edges[k, 0]), _find(parent, edges[k, 1])
        if a != b:
            parent[max(a, b)] = min(a, b)


@njit(cache=True)
def roots(parent):
    """The root of every element (roots are smaller than their children: one pass settles it)."""
    out = parent.copy()
    for i in range(out.shape[0]):
        out[i] = out[out[i]]
    return out


@njit(cache=True)
def pairs_of_groups(offsets, members):
    """(m, 2) every pair (i < j) inside each group: quadratic, for audits of small corpora."""
    sizes = offsets[1:] - offsets[:-1]
    out = np.empty((((sizes * (sizes - 1)) // 2).sum(), 2), dtype=np.int64)
    k = 0
    for g in range(offsets.shape[0] - 1):
        for x in range(offsets[g], offsets[g + 1]):
            for y in range(x + 1, offsets[g + 1]):
                out[k, 0], out[k, 1] = min(members[x], members[y]), max(members[x], members[y])
                k += 1
    return out


@njit(cache=True)
def copy_ranges(src, src_starts, dst, dst_starts, lengths):
    """dst[dst_starts[i] : +lengths[i]] = src[src_starts[i] : +lengths[i]] for every i."""
    for i in range(lengths.shape[0]):
        for k in range(lengths[i]):
            dst[dst_starts[i] + k] = src[src_starts[i] + k]
