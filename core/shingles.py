"""Code shingles for MinHash: the tokens, windows and hashes the data pipeline's MinHash uses.

Pure Python (plus xxhash), so evaluation's audit computes the same signatures through
datasketch (`datasketch.MinHash(..., hashfunc=shingle_hash).update_batch(shingles(text, n))`)
that the pipeline's numba kernel computes in bulk (`data_pipeline/minhash.py`).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence

import xxhash

_TOKEN_RE = re.compile(r"[A-Za-z0-9_\u0080-\U0010FFFF]+|[^ \t\n\r\f\v]")


def tokenize(text: str) -> list[str]:
    """Code tokens: word runs and single punctuation characters (reference implementation)."""
    return _TOKEN_RE.findall(text)


def shingles(text: str, ngram: int) -> list[tuple[str, ...]]:
    """The ``ngram``-token windows of ``text``, or its whole token sequence when shorter."""
    tokens = tokenize(text)
    if len(tokens) < ngram:
        return [tuple(tokens)]
    return [tuple(tokens[i : i + ngram]) for i in range(len(tokens) - ngram + 1)]


def shingle_hash(shingle: Sequence[str]) -> int:
    """64-bit hash of one shingle: the reference for the numba kernel and the datasketch hashfunc."""
    words = [xxhash.xxh64_intdigest(t.encode("utf-8", "surrogatepass")) for t in shingle]
    return xxhash.xxh64_intdigest(struct.pack(f"<{len(words)}Q", *words))
