"""MinHash and LSH parameters: a small module, so that configs validate without numba or datasketch.

`core.neardup` computes the signatures these parameters describe and decides with them.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass
from importlib.metadata import version

# "affine64" (datasketch >= 2.0): 64-bit input hashes, fmix64 pre-mix, a*h+b mod 2^64 with
# odd a. It matches our 64-bit shingle hashes; "affine32" would truncate them and "legacy"
# is biased on large sets.
SCHEME = "affine64"
# "code": word runs and single punctuation characters, case kept (`core.shingles`).
# "words": the pieces between non-word characters, as the reference MinHash dedup tools split.
TOKENS = ("code", "words")


@functools.cache
def _optimal_bands_rows(threshold: float, num_perm: int) -> tuple[int, int]:
    import datasketch

    lsh = datasketch.MinHashLSH(threshold=threshold, num_perm=num_perm)
    return lsh.b, lsh.r


@dataclass(frozen=True)
class MinHashConfig:
    """MinHash and LSH parameters; every field changes which documents count as duplicates."""

    num_perm: int = 256
    ngram: int = 5
    threshold: float = 0.7
    seed: int = 42
    scheme: str = SCHEME
    exact_check: bool = False
    # LSH bands are tuned for this Jaccard; default: the threshold, or 0.2 below it with
    # exact_check, so pairs at the threshold are nearly always candidates (recall) and the
    # exact check removes the extra candidates (precision).
    candidate_threshold: float | None = None
    # What a shingle is made of (see TOKENS); lowercase lower-cases the text before tokenizing.
    tokens: str = "code"
    lowercase: bool = False

    def __post_init__(self) -> None:
        if self.scheme != SCHEME:
            raise ValueError(
                f"scheme={self.scheme!r} is not supported: shingle hashes are 64-bit, use scheme={SCHEME!r}"
            )
        if self.tokens not in TOKENS:
            raise ValueError(f"tokens={self.tokens!r} is not supported: choose one of {TOKENS}")
        if self.num_perm < 2 or self.ngram < 1 or not 0.0 < self.threshold <= 1.0:
            raise ValueError(
                f"need num_perm >= 2, ngram >= 1 and 0 < threshold <= 1, got {self.num_perm}, "
                f"{self.ngram}, {self.threshold}"
            )
        if self.candidate_threshold is not None and not 0.0 < self.candidate_threshold <= self.threshold:
            raise ValueError(f"need 0 < candidate_threshold <= threshold, got {self.candidate_threshold}")

    def lsh_threshold(self) -> float:
        if self.candidate_threshold is not None:
            return self.candidate_threshold
        return max(round(self.threshold - 0.2, 4), 0.05) if self.exact_check else self.threshold

    def bands_rows(self) -> tuple[int, int]:
        """(bands, rows) that datasketch's MinHashLSH picks for the LSH threshold and num_perm."""
        return _optimal_bands_rows(self.lsh_threshold(), self.num_perm)

    def as_manifest(self) -> dict:
        """The parameters a manifest must record to make a dedup run reproducible."""
        bands, rows = self.bands_rows()
        return {
            **asdict(self),
            "bands": bands,
            "rows": rows,
            "lsh_threshold": self.lsh_threshold(),
            "hash": "xxh64(le64 token xxh64 digests)",
            "datasketch_version": version("datasketch"),
        }
