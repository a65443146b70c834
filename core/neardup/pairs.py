"""Near-duplicate pairs, within one set of texts and between two: for audits and decontamination.

A pair is a near-duplicate under a `MinHashConfig` exactly when `dedup.find_duplicates` would
decide to join it: the two texts share an LSH band (`lsh.band_keys`); with ``exact_check``
their Jaccard similarity also reaches the threshold, by the signatures' estimate when it is
five standard deviations clear of it and by the exact shingle sets otherwise
(`lsh.estimate_groups`, `lsh.verify_pairs`); without it a shared band is enough.

`find_duplicates` only needs clusters, so it skips pairs already connected; these functions
decide and list every pair, which is quadratic in a bucket's size: for benchmark-sized sets,
and for the pairs between a batch and a fixed set of references (`ReferenceIndex`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from core.minhash_config import MinHashConfig
from core.neardup.dedup import verify_texts
from core.neardup.lsh import (
    band_keys,
    cross_candidates,
    estimate_groups,
    estimate_margin,
    groups_of,
    pairs_of_groups,
    sorted_band_keys,
)
from core.neardup.minhash import minhash_signatures


def candidate_pairs(signatures: np.ndarray, cfg: MinHashConfig) -> np.ndarray:
    """(n_pairs, 2) document index pairs ``i < j`` sharing a band, sorted."""
    sigs = np.asarray(signatures, dtype=np.uint64).reshape(-1, cfg.num_perm)
    keys = band_keys(sigs, *cfg.bands_rows())
    docs = np.arange(len(sigs), dtype=np.int64)
    pairs = [pairs_of_groups(*groups_of(keys[b], docs)) for b in range(keys.shape[0])]
    return np.unique(np.concatenate([np.empty((0, 2), dtype=np.int64), *pairs]), axis=0)


def decide_pairs(
    pairs: np.ndarray, signatures: np.ndarray, texts: Sequence[str], cfg: MinHashConfig
) -> np.ndarray:
    """The candidate ``pairs`` (``i < j``, rows of ``signatures`` and ``texts``) that are near-duplicates, sorted."""
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    if not cfg.exact_check:
        return pairs
    # Each pair as a bucket of two: the same decisions find_duplicates makes inside a bucket.
    members = np.ascontiguousarray(pairs).ravel()
    offsets = np.arange(0, len(members) + 1, 2, dtype=np.int64)
    margin = estimate_margin(cfg.threshold, cfg.num_perm)
    joined, ambiguous, _ = estimate_groups(offsets, members, members, signatures, cfg.threshold, margin)
    decided = np.concatenate((joined, verify_texts(ambiguous, texts, cfg, skip_joined=False)[0]))
    # a pair of identical signatures is joined in either order
    return np.unique(np.sort(decided, axis=1), axis=0).reshape(-1, 2)


def near_duplicate_pairs(signatures: np.ndarray, texts: Sequence[str], cfg: MinHashConfig) -> np.ndarray:
    """(n_pairs, 2) index pairs ``i < j`` of near-duplicate ``texts`` (with their ``signatures``), sorted."""
    sigs = np.ascontiguousarray(signatures, dtype=np.uint64).reshape(-1, cfg.num_perm)
    return decide_pairs(candidate_pairs(sigs, cfg), sigs, texts, cfg)


class ReferenceIndex:
    """Reference texts indexed once, to find which of them each text of a batch near-duplicates.

    ``pairs(texts)`` gives the pairs across the two sets that `near_duplicate_pairs` gives on
    ``texts`` and the references together.
    """

    def __init__(self, texts: Sequence[str], cfg: MinHashConfig):
        self.cfg, self.texts = cfg, list(texts)
        self.signatures = minhash_signatures(self.texts, cfg)
        self.keys, self.docs = sorted_band_keys(band_keys(self.signatures, *cfg.bands_rows()))

    def pairs(self, texts: Sequence[str]) -> np.ndarray:
        """(n_pairs, 2) pairs (i, j), ``texts[i]`` a near-duplicate of reference j, sorted."""
        sigs = minhash_signatures(texts, self.cfg)
        found = cross_candidates(band_keys(sigs, *self.cfg.bands_rows()), self.keys, self.docs)
        # Decided over the texts and references involved, numbered texts first.
        mine, refs = np.unique(found[:, 0]), np.unique(found[:, 1])
        local = np.stack(
            (np.searchsorted(mine, found[:, 0]), len(mine) + np.searchsorted(refs, found[:, 1])), 1
        )
        both = [texts[i] for i in mine] + [self.texts[j] for j in refs]
        kept = decide_pairs(local, np.concatenate((sigs[mine], self.signatures[refs])), both, self.cfg)
        return np.stack((mine[kept[:, 0]], refs[kept[:, 1] - len(mine)]), axis=1)
