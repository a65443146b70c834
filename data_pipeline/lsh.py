"""The compiled parts of MinHash-LSH clustering: band keys, buckets, exact checks, union-find.

Each function works on one piece of the corpus (one band's keys of one partition, one
bucket group file, one edge file), so the sharded job (`minhash_job.py`) and the in-memory
`dedup.find_duplicates` run the same code, and memory is bounded by the piece.

- **Band keys**: the ``rows`` values of each band of a signature hashed to one uint64
  (xxh64 of their little-endian bytes). Two documents land in one bucket when a band key is
  equal; for distinct bands of ``rows`` values a false collision has probability 2^-64.
- **Groups**: the buckets of one band holding two or more documents, as CSR arrays
  (``offsets``, ``members``; members ascending).
- **Decisions** (``exact_check``): inside each group, documents with identical signatures
  join without a check; every other pair not already connected within the group gets the
  signatures' estimate of its Jaccard similarity (the share of equal MinHash values). An
  estimate more than ``margin`` above the threshold joins the pair, one more than ``margin``
  below it rejects the pair, and a pair in between is *ambiguous*: it is decided by the exact
  Jaccard of its sorted shingle-hash sets (``verify_pairs``). Skipping connected pairs keeps
  the connected components those of "decide every pair", at a fraction of the work on large
  clusters, and shingle sets are needed only for documents of ambiguous pairs.
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


def estimate_margin(threshold: float, num_perm: int, z: float = 5.0) -> float:
    """z standard deviations of a MinHash estimate of a Jaccard at ``threshold``."""
    return z * float(np.sqrt(threshold * (1.0 - threshold) / num_perm))


@njit(cache=True)
def estimate_groups(offsets, members, slot, sigs, threshold, margin):
    """Decide each group's pairs by their signatures: (edges joined, ambiguous pairs, estimates made).

    ``slot[i]`` is the row of ``members[i]``'s signature in ``sigs``. Members with identical
    signatures join their first such member unchecked (a thousand copies cost a sort, not a
    million estimates); the distinct signatures are then compared pairwise. An ambiguous pair
    is listed for the exact check and left unjoined.
    """
    edges = np.empty((members.shape[0], 2), dtype=np.int64)
    pairs = np.empty((16, 2), dtype=np.int64)
    n_edges = n_pairs = estimates = 0
    num_perm = sigs.shape[1]
    for g in range(offsets.shape[0] - 1):
        lo, k = offsets[g], offsets[g + 1] - offsets[g]
        prints = np.empty(k, dtype=np.uint64)
        for i in range(k):
            prints[i] = xxh64_words(sigs[slot[lo + i]], 0, num_perm)
        order = np.argsort(prints, kind="mergesort")
        distinct = np.empty(k, dtype=np.int64)
        n_distinct = 0
        for t in range(k):
            x = order[t]
            if n_distinct:
                first = distinct[n_distinct - 1]
                if (sigs[slot[lo + first]] == sigs[slot[lo + x]]).all():
                    edges[n_edges, 0], edges[n_edges, 1] = members[lo + first], members[lo + x]
                    n_edges += 1
                    continue
            distinct[n_distinct] = x
            n_distinct += 1
        distinct = np.sort(distinct[:n_distinct])
        parent = np.arange(n_distinct)
        for x in range(1, n_distinct):
            sx = sigs[slot[lo + distinct[x]]]
            for y in range(x):
                rx, ry = _find(parent, x), _find(parent, y)
                if rx == ry:
                    continue
                sy = sigs[slot[lo + distinct[y]]]
                equal = 0
                for j in range(num_perm):
                    equal += sx[j] == sy[j]
                estimates += 1
                estimate = equal / num_perm
                a, b = members[lo + distinct[y]], members[lo + distinct[x]]
                if estimate >= threshold + margin:
                    parent[max(rx, ry)] = min(rx, ry)
                    edges[n_edges, 0], edges[n_edges, 1] = a, b
                    n_edges += 1
                elif estimate > threshold - margin:
                    if n_pairs == pairs.shape[0]:
                        grown = np.empty((2 * n_pairs, 2), dtype=np.int64)
                        grown[:n_pairs] = pairs
                        pairs = grown
                    pairs[n_pairs, 0], pairs[n_pairs, 1] = a, b
                    n_pairs += 1
    return edges[:n_edges], pairs[:n_pairs], estimates


@njit(cache=True)
def verify_pairs(pairs, slot, set_offsets, set_hashes, threshold):
    """The pairs whose exact shingle-set Jaccard reaches ``threshold``.

    ``slot`` maps the pairs' documents, flattened (two per pair), to their sets.
    """
    keep = np.zeros(pairs.shape[0], dtype=np.bool_)
    for p in range(pairs.shape[0]):
        a, b = slot[2 * p], slot[2 * p + 1]
        keep[p] = _jaccard_at_least(
            set_hashes[set_offsets[a] : set_offsets[a + 1]],
            set_hashes[set_offsets[b] : set_offsets[b + 1]],
            threshold,
        )
    return pairs[keep]


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
