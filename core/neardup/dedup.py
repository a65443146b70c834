"""Near-duplicate removal in memory: MinHash LSH buckets, exact checks, lowest id kept.

``find_duplicates`` puts two documents in one bucket when any band of their signatures
(the bands and rows of ``MinHashConfig.bands_rows``, as ``datasketch.MinHashLSH`` picks them)
is identical. Without ``cfg.exact_check`` a bucket is one cluster. With it, a bucket's pairs
are joined when their signatures' Jaccard estimate is clearly above the threshold (by five
standard deviations of the estimate), dropped when clearly below, and otherwise decided by
the exact Jaccard of their shingle sets (`lsh.py`). Clusters are the connected components
over all bands (`clusters.py`), and each keeps its lowest natural id, so the output does not
depend on input order.

The compiled steps live in `lsh.py` and are shared with the sharded job of the build
(`data_pipeline/minhash_job.py`), which runs them shard by shard from disk, and with the pair
searches of `pairs.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from core.minhash_config import MinHashConfig
from core.neardup.clusters import lowest_ids, roots, union_edges
from core.neardup.lsh import (
    band_keys,
    distinct_pairs,
    estimate_groups,
    estimate_margin,
    groups_of,
    star_edges,
    verify_pairs,
)
from core.neardup.minhash import minhash_signatures, shingle_set_csr


@dataclass
class DedupResult:
    """What ``find_duplicates`` decided, with the counts a manifest records."""

    keep: list[bool]  # aligned with ids
    cluster_of: dict[str, str]  # removed id -> kept id of its cluster
    n_clusters: int  # clusters with >= 2 members
    n_bucket_pairs: int  # sum over bands and buckets of k*(k-1)/2: the pairs LSH proposes, repeats included
    n_estimates: int  # pairs decided or sent on by their signatures' Jaccard estimate
    n_checks: int  # exact Jaccard checks made: the ambiguous pairs (0 without exact_check)
    n_rejected: int  # checks below the threshold


def find_duplicates(
    ids: Sequence[str],
    signatures: np.ndarray,
    cfg: MinHashConfig,
    texts: Sequence[str] | None = None,
) -> DedupResult:
    """Cluster near-duplicates and keep the lowest id of each cluster.

    With ``cfg.exact_check``, ``texts`` (the texts the signatures were computed from) are
    required; only documents that share a bucket with another are shingled again.
    """
    ids = list(ids)  # a datasets Column indexes slowly, one row at a time
    sigs = _check_inputs(ids, signatures, cfg, texts)
    keys = band_keys(sigs, *cfg.bands_rows())
    docs = np.arange(len(ids), dtype=np.int64)
    groups = [groups_of(keys[b], docs) for b in range(keys.shape[0])]
    bucket_pairs = sum(int((np.diff(off) * (np.diff(off) - 1) // 2).sum()) for off, _ in groups)
    parent = docs.copy()
    estimates = checks = rejected = 0
    if cfg.exact_check:
        assert texts is not None
        margin = estimate_margin(cfg.threshold, cfg.num_perm)
        ambiguous = [np.empty((0, 2), dtype=np.int64)]
        for offsets, members in groups:
            edges, pairs, n = estimate_groups(offsets, members, members, sigs, cfg.threshold, margin)
            union_edges(parent, edges)
            ambiguous.append(pairs)
            estimates += n
        # each distinct pair once, and only where the joined edges leave it open (`lsh.open_pairs`)
        pairs, root = distinct_pairs(np.concatenate(ambiguous)), roots(parent)
        accepted, checks = verify_texts(pairs[root[pairs[:, 0]] != root[pairs[:, 1]]], texts, cfg)
        union_edges(parent, accepted)
        rejected = checks - len(accepted)
    else:
        for offsets, members in groups:
            union_edges(parent, star_edges(offsets, members))
    rep = lowest_ids(roots(parent), lambda members: [ids[i] for i in members])
    keep = rep == docs
    return DedupResult(
        keep=keep.tolist(),
        cluster_of={ids[i]: ids[rep[i]] for i in np.flatnonzero(~keep)},
        n_clusters=len(set(rep[~keep].tolist())),
        n_bucket_pairs=bucket_pairs,
        n_estimates=estimates,
        n_checks=checks,
        n_rejected=rejected,
    )


def sets_csr(texts: Sequence[str], cfg: MinHashConfig) -> tuple[np.ndarray, np.ndarray]:
    """Sorted shingle-hash sets of ``texts`` as CSR arrays (offsets, hashes), tokenized as ``cfg`` says."""
    return shingle_set_csr(list(texts), cfg.ngram, tokens=cfg.tokens, lowercase=cfg.lowercase)


def verify_texts(
    pairs: np.ndarray, texts: Sequence[str], cfg: MinHashConfig, skip_joined: bool = True
) -> tuple[np.ndarray, int]:
    """The ``pairs`` (indices into ``texts``) whose exact shingle-set Jaccard reaches ``cfg.threshold``,
    and the checks made (`lsh.verify_pairs`; ``skip_joined=False`` decides every pair).

    Only the texts of a pair are shingled, once each: ambiguous pairs are few.
    """
    involved = np.unique(pairs)
    set_offsets, set_hashes = sets_csr([texts[i] for i in involved], cfg)
    slot = np.searchsorted(involved, pairs.ravel())
    return verify_pairs(pairs, slot, set_offsets, set_hashes, cfg.threshold, skip_joined)


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
    return np.ascontiguousarray(sigs)


def warm_kernels() -> None:
    """Run every compiled step of `find_duplicates` once, on three short texts of which two are an
    ambiguous pair, so that the first real call of a process does not pay for numba's start (its
    CPU target, each kernel's cached machine code: about 0.3 s)."""
    cfg = MinHashConfig(exact_check=True)
    lines = [f"value_{i} = compute({i}, step={i % 7})" for i in range(60)]
    edited = [f"other_{i} = call({i})" if i % 10 == 0 else line for i, line in enumerate(lines)]
    texts = ["\n".join(lines), "\n".join(edited), "print('x')"]
    find_duplicates(["a", "b", "c"], minhash_signatures(texts, cfg), cfg, texts)
