"""The compiled parts of MinHash-LSH: band keys, buckets, signature estimates, exact checks.

Each function works on one piece of the corpus (one band's keys of one partition, one
bucket group file, one list of pairs), so the build's sharded job
(`data_pipeline/minhash_job.py`), the in-memory `dedup.find_duplicates` and the pair searches
of `pairs.py` run the same code, and memory is bounded by the piece.

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
  Jaccard of its sorted shingle-hash sets (``verify_pairs``), once per distinct pair that the
  joined edges do not already connect (``open_pairs``), and not where the pairs accepted before
  it connect it. Skipping connected pairs keeps the connected components those of "decide every
  pair", at a fraction of the work on large clusters, and shingle sets are needed only for
  documents of ambiguous pairs.

Clusters are joined by the union-find of `clusters.py`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from core.neardup.clusters import find, link, roots, union_edges
from core.neardup.minhash import xxh64_words

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
    """Buckets with >= 2 documents among (key, doc) entries of one band: CSR offsets and members.

    Entries already in (key, doc) order (a shard's sorted band keys) are not sorted again."""
    step, same = keys[1:] > keys[:-1], keys[1:] == keys[:-1]
    if not (step | (same & (docs[1:] >= docs[:-1]))).all():
        order = np.lexsort((docs, keys))
        keys, docs = keys[order], docs[order]
        same = keys[1:] == keys[:-1]
    starts = np.flatnonzero(np.concatenate(([True], ~same))) if len(keys) else np.empty(0, int)
    sizes = np.diff(np.append(starts, len(keys)))
    big = sizes > 1
    if not big.any():
        return np.zeros(1, dtype=np.int64), np.empty(0, dtype=np.int64)
    offsets = np.concatenate(([0], np.cumsum(sizes[big]))).astype(np.int64)
    return offsets, docs[np.repeat(big, sizes)].astype(np.int64)


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


@njit(cache=True, inline="always")
def signature_estimate(sx, sy):
    """The share of equal MinHash values of two signatures: their estimate of the Jaccard similarity."""
    equal = 0
    for j in range(sx.shape[0]):
        equal += sx[j] == sy[j]
    return equal / sx.shape[0]


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
                rx, ry = find(parent, x), find(parent, y)
                if rx == ry:
                    continue
                estimates += 1
                estimate = signature_estimate(sx, sigs[slot[lo + distinct[y]]])
                a, b = members[lo + distinct[y]], members[lo + distinct[x]]
                if estimate >= threshold + margin:
                    link(parent, rx, ry)
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


def open_pairs(pairs: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """The distinct ``pairs`` ((m, 2), i < j) whose documents ``edges`` do not already connect, in
    ascending order: only these can change the components. The bands list a pair once per shared
    bucket, and the estimates join most of a cluster, so this is a fraction of the ambiguous pairs."""
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    pairs = distinct_pairs(pairs)
    if not len(pairs):
        return pairs
    docs = np.unique(np.concatenate([pairs.ravel(), edges.ravel()]))
    parent = np.arange(len(docs), dtype=np.int64)
    union_edges(parent, np.searchsorted(docs, edges))
    root = roots(parent)
    local = np.searchsorted(docs, pairs)
    return pairs[root[local[:, 0]] != root[local[:, 1]]]


def distinct_pairs(pairs: np.ndarray) -> np.ndarray:
    """The distinct rows of non-negative (m, 2) ``pairs``, ascending: one 64-bit key per row where
    both fit in 32 bits (a plain sort, ~10x ``np.unique(axis=0)``'s)."""
    if not len(pairs):
        return pairs
    if pairs.min() < 0 or pairs.max() >= 1 << 32:
        return np.unique(pairs, axis=0)
    keys = np.unique((pairs[:, 0] << 32) | pairs[:, 1])
    return np.stack([keys >> 32, keys & 0xFFFFFFFF], axis=1)


@njit(cache=True)
def verify_pairs(pairs, slot, set_offsets, set_hashes, threshold, skip_joined):
    """The pairs whose exact shingle-set Jaccard reaches ``threshold``, and the checks made.

    ``slot`` maps the pairs' documents, flattened (two per pair), to their sets. With
    ``skip_joined`` (where only the components count), a pair whose documents the pairs accepted
    before it already connect is not checked: it cannot change them.
    """
    keep = np.zeros(pairs.shape[0], dtype=np.bool_)
    parent = np.arange(set_offsets.shape[0] - 1)
    checks = 0
    for p in range(pairs.shape[0]):
        a, b = find(parent, slot[2 * p]), find(parent, slot[2 * p + 1])
        if skip_joined and a == b:
            continue
        checks += 1
        if _jaccard_at_least(
            set_hashes[set_offsets[slot[2 * p]] : set_offsets[slot[2 * p] + 1]],
            set_hashes[set_offsets[slot[2 * p + 1]] : set_offsets[slot[2 * p + 1] + 1]],
            threshold,
        ):
            keep[p] = True
            link(parent, a, b)
    return pairs[keep], checks


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


def sorted_band_keys(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each band's keys in ascending order and the documents in that order: a side `cross_candidates` looks up."""
    order = np.argsort(keys, axis=-1, kind="stable")
    return np.take_along_axis(keys, order, -1), order.astype(np.int64)


def cross_candidates(keys: np.ndarray, ref_keys: np.ndarray, ref_docs: np.ndarray) -> np.ndarray:
    """(m, 2) unique pairs (document i, reference j) that share a band key, sorted.

    ``keys`` are the documents' `band_keys`; ``ref_keys``, ``ref_docs`` the references' from
    `sorted_band_keys`. These are the pairs across the two sides of the buckets `groups_of` would
    form over both, found by a lookup, so a fixed reference side is sorted once, not per batch.
    """
    found = [np.empty((0, 2), dtype=np.int64)]
    for b in range(keys.shape[0]):
        lo = np.searchsorted(ref_keys[b], keys[b], side="left")
        count = np.searchsorted(ref_keys[b], keys[b], side="right") - lo
        docs = np.repeat(np.arange(keys.shape[1], dtype=np.int64), count)
        first = np.repeat(lo - (np.cumsum(count) - count), count)  # a document's matches are consecutive
        found.append(np.stack((docs, ref_docs[b][first + np.arange(len(docs))]), axis=1))
    return np.unique(np.concatenate(found), axis=0)
