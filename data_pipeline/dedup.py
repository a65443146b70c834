"""Near-duplicate removal: MinHash LSH candidates, union-find clusters, lowest id kept.

``find_duplicates`` gives the candidates that ``datasketch.MinHashLSH`` (the bands and rows
of ``MinHashConfig.bands_rows``) would give for our signatures: two documents are candidates
when any band of their signatures is identical. Every candidate pair is merged (after an
exact Jaccard check with ``cfg.exact_check``), and each resulting cluster keeps one member.

Ids are ordered naturally and deterministically: runs of ASCII digits compare as numbers,
the rest as text, ties broken by plain string order (``"r2" < "r10"``, ``"r01" < "r1"``).
The lowest id of a cluster is kept, so the output does not depend on input order.

Documents with identical signatures form one LSH node before banding: they collide in every
band anyway, and a thousand copies of a file then cost one bucket entry instead of half a
million pairs. Pair enumeration is still quadratic in the number of *distinct* signatures
sharing a bucket.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations, product

import numpy as np
from numba import njit

from data_pipeline.minhash import (
    MinHashConfig,
    minhash_signatures,
    shingle_hash,
    shingle_sets,
    shingles,
    tokenize,
)

# The public near-dedup API, signatures included, is importable from here.
__all__ = [
    "DedupResult",
    "MinHashConfig",
    "candidate_pairs",
    "dedup_text",
    "find_duplicates",
    "id_sort_key",
    "minhash_signatures",
    "shingle_hash",
    "shingles",
    "signature_batch",
    "tokenize",
]
_DIGITS = re.compile(r"([0-9]+)")


@dataclass
class DedupResult:
    """What ``find_duplicates`` decided, with the counts a manifest records."""

    keep: list[bool]  # aligned with ids
    cluster_of: dict[str, str]  # removed id -> kept id of its cluster
    n_clusters: int  # clusters with >= 2 members
    n_candidate_pairs: int  # distinct document pairs sharing >= 1 band
    n_pairs_rejected_by_exact_check: int


def dedup_text(row: Mapping[str, str]) -> str:
    """The text an edit example is deduplicated on: an edit is a duplicate only as a whole."""
    return row["before"] + "\n" + row["after"]


def signature_batch(
    batch: Mapping[str, Sequence[str]], cfg: MinHashConfig, fields: Sequence[str] = ("before", "after")
) -> dict[str, np.ndarray]:
    """``{"minhash": signatures}`` of a columnar batch, for executors.

    The text of a row is `dedup_text` for ``("before", "after")``, else its `fields` joined
    by newlines. A pure function of the batch rows, so any batching gives the same column:
    ``ds.map(signature_batch, batched=True, num_proc=N, fn_kwargs={"cfg": cfg})``.
    """
    if tuple(fields) == ("before", "after"):
        texts = [
            dedup_text({"before": b, "after": a})
            for b, a in zip(batch["before"], batch["after"], strict=True)
        ]
    else:
        texts = ["\n".join(parts) for parts in zip(*(batch[f] for f in fields), strict=True)]
    return {"minhash": minhash_signatures(texts, cfg)}


def id_sort_key(id_: str) -> tuple[tuple[str | int, ...], str]:
    """Natural sort key of an id: the order in which the lowest id of a cluster is kept."""
    parts = _DIGITS.split(id_)
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts)), id_


def find_duplicates(
    ids: Sequence[str],
    signatures: np.ndarray,
    cfg: MinHashConfig,
    texts: Sequence[str] | None = None,
) -> DedupResult:
    """Cluster near-duplicates and keep the lowest id of each cluster.

    With ``cfg.exact_check``, ``texts`` (the texts the signatures were computed from) are
    required and a candidate pair is merged only if the exact Jaccard similarity of its
    shingle sets (as 64-bit shingle hashes) is at least ``cfg.threshold``.
    """
    ids = list(ids)  # a datasets Column indexes slowly, one row at a time
    sigs = _check_inputs(ids, signatures, cfg, texts)
    node_of, node_sigs = _collapse(sigs)
    node_pairs = _band_pairs(node_sigs, *cfg.bands_rows())
    size = np.bincount(node_of, minlength=len(node_sigs))
    n_candidates = int(
        (size * (size - 1) // 2).sum() + (size[node_pairs[:, 0]] * size[node_pairs[:, 1]]).sum()
    )
    rejected = 0
    unit_of, unit_pairs = node_of, node_pairs
    if cfg.exact_check:
        unit_of, unit_pairs, rejected = _exact_filter(node_of, node_pairs, list(texts), cfg)

    # Union-find over documents in natural id order, so that each root is the lowest id; star
    # edges: each document to the first of its unit, and first to first for accepted unit pairs.
    order = np.asarray(sorted(range(len(ids)), key=lambda i: id_sort_key(ids[i])), dtype=np.int64)
    unit_of = unit_of[order]
    first = np.full(int(unit_of.max(initial=-1)) + 1, len(ids), dtype=np.int64)
    np.minimum.at(first, unit_of, np.arange(len(ids)))
    edges = np.concatenate((np.stack((first[unit_of], np.arange(len(ids))), axis=1), first[unit_pairs]))
    root = _union_find(len(ids), edges)

    rep = np.empty(len(ids), dtype=np.int64)
    rep[order] = order[root]
    keep = rep == np.arange(len(ids))
    return DedupResult(
        keep=keep.tolist(),
        cluster_of={ids[i]: ids[rep[i]] for i in np.flatnonzero(~keep)},
        n_clusters=int((np.bincount(root) >= 2).sum()),
        n_candidate_pairs=n_candidates,
        n_pairs_rejected_by_exact_check=rejected,
    )


def candidate_pairs(signatures: np.ndarray, cfg: MinHashConfig) -> np.ndarray:
    """(n_pairs, 2) document index pairs ``i < j`` sharing a band, sorted: for audits and evaluation.

    Unlike ``find_duplicates`` this lists every pair, so it is quadratic in cluster size.
    """
    sigs = np.asarray(signatures, dtype=np.uint64)
    node_of, node_sigs = _collapse(sigs)
    members = np.split(np.argsort(node_of, kind="stable"), np.cumsum(np.bincount(node_of))[:-1])
    pairs = [p for m in members for p in combinations(m, 2)]
    pairs += [
        p for u, v in _band_pairs(node_sigs, *cfg.bands_rows()) for p in product(members[u], members[v])
    ]
    out = np.sort(np.asarray(pairs, dtype=np.int64).reshape(-1, 2), axis=1)
    return np.unique(out, axis=0)


def _check_inputs(
    ids: Sequence[str], signatures: np.ndarray, cfg: MinHashConfig, texts: Sequence[str] | None
) -> np.ndarray:
    sigs = np.asarray(signatures, dtype=np.uint64)
    if sigs.size == 0:
        sigs = sigs.reshape(0, cfg.num_perm)
    if sigs.shape != (len(ids), cfg.num_perm):
        raise ValueError(
            f"signatures have shape {sigs.shape}, expected ({len(ids)}, {cfg.num_perm}): "
            "one row of cfg.num_perm values per id, computed with the same cfg"
        )
    if len(set(ids)) != len(ids):
        raise ValueError("ids must be unique: the kept id of a cluster names it")
    if cfg.exact_check and (texts is None or len(texts) != len(ids)):
        raise ValueError("exact_check=True needs texts, one per id (the texts the signatures came from)")
    return sigs


def _groups(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sort rows by their bytes; return the order and the start of each run of equal rows."""
    keys = np.ascontiguousarray(rows).view(np.dtype((np.void, rows.itemsize * rows.shape[1]))).ravel()
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    starts = np.flatnonzero(
        np.concatenate((np.ones(min(len(keys), 1), dtype=bool), ordered[1:] != ordered[:-1]))
    )
    return order, starts


def _collapse(sigs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Node of each document (one node per distinct signature) and each node's signature."""
    order, starts = _groups(sigs)
    is_start = np.zeros(len(sigs), dtype=bool)
    is_start[starts] = True
    node_of = np.empty(len(sigs), dtype=np.int64)
    node_of[order] = np.cumsum(is_start) - 1
    return node_of, sigs[order[starts]]


def _band_pairs(sigs: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """Distinct (i, j), i < j, of rows of ``sigs`` equal in at least one band, like MinHashLSH."""
    codes = [np.empty(0, dtype=np.int64)]
    for band in range(bands):
        order, starts = _groups(sigs[:, band * rows : (band + 1) * rows])
        sizes = np.diff(np.append(starts, len(sigs)))
        codes.append(_bucket_pair_codes(order, starts[sizes > 1], sizes[sizes > 1], len(sigs)))
    codes = np.unique(np.concatenate(codes))
    return np.stack((codes // max(len(sigs), 1), codes % max(len(sigs), 1)), axis=1)


@njit(cache=True)
def _bucket_pair_codes(order, starts, sizes, n):
    out = np.empty((sizes * (sizes - 1) // 2).sum(), dtype=np.int64)
    k = 0
    for g in range(starts.shape[0]):
        for x in range(starts[g], starts[g] + sizes[g]):
            for y in range(x + 1, starts[g] + sizes[g]):
                i, j = order[x], order[y]
                out[k] = min(i, j) * n + max(i, j)
                k += 1
    return out


@njit(cache=True)
def _union_find(n, edges):
    parent = np.arange(n)
    for k in range(edges.shape[0]):
        a, b = edges[k, 0], edges[k, 1]
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        while parent[b] != b:
            parent[b] = parent[parent[b]]
            b = parent[b]
        parent[max(a, b)] = min(a, b)
    for i in range(n):
        parent[i] = parent[parent[i]]  # roots are smaller than their children: one pass settles it
    return parent


def _exact_filter(
    node_of: np.ndarray, node_pairs: np.ndarray, texts: Sequence[str], cfg: MinHashConfig
) -> tuple[np.ndarray, np.ndarray, int]:
    """Split nodes into units of identical shingle sets and keep unit pairs with Jaccard >= threshold.

    Returns the unit of each document, the accepted unit pairs, and how many document pairs
    were rejected. Only documents in some candidate pair are read again.
    """
    size = np.bincount(node_of)
    involved = np.zeros(len(size), dtype=bool)
    involved[node_pairs.ravel()] = True
    involved |= size > 1
    docs = np.flatnonzero(involved[node_of])
    unit_of = node_of.copy()  # uninvolved documents are singletons: their node id is a free unit id
    units: dict[tuple[int, bytes], int] = {}
    unit_set: dict[int, np.ndarray] = {}
    node_units: dict[int, list[int]] = {}
    for d, s in zip(docs, shingle_sets([texts[i] for i in docs], cfg.ngram), strict=True):
        key = (int(node_of[d]), s.tobytes())
        if key not in units:
            units[key] = len(size) + len(units)
            unit_set[units[key]] = s
            node_units.setdefault(key[0], []).append(units[key])
        unit_of[d] = units[key]
    unit_size = np.bincount(unit_of)
    checks = [p for us in node_units.values() for p in combinations(us, 2)]
    checks += [p for u, v in node_pairs for p in product(node_units[u], node_units[v])]
    accepted, rejected = [], 0
    for s, t in checks:
        inter = len(np.intersect1d(unit_set[s], unit_set[t], assume_unique=True))
        if inter / (len(unit_set[s]) + len(unit_set[t]) - inter) >= cfg.threshold:
            accepted.append((s, t))
        else:
            rejected += int(unit_size[s] * unit_size[t])
    return unit_of, np.asarray(accepted, dtype=np.int64).reshape(-1, 2), rejected
