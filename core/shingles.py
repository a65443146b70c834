r"""Shingles for MinHash: the tokens, windows and hashes of `core.neardup.minhash`, in pure Python.

The reference definition (plus xxhash): the numba kernel computes the same shingle hashes in
bulk, and ``datasketch.MinHash(..., hashfunc=shingle_hash).update_batch(shingles(text, n))``
gives the kernel's signature bit for bit, which is how the tests pin the kernel.

Two tokenizations (`MinHashConfig.tokens`):

- ``"code"`` (default): word runs (ASCII letters, digits, ``_`` and any non-ASCII character)
  and single punctuation characters; whitespace only separates.
- ``"words"``: ``re.split(r"\W", text)``, the split of ChenghaoMou/text-dedup's MinHash as
  forked by cassanof/code-dedup, the tool EditPackFT was deduplicated with: every non-word
  character (Unicode ``\W``) ends a token and is dropped, so consecutive ones leave empty
  tokens, which are kept as tokens (see docs/dedup.md).

``lowercase`` lower-cases the whole text first (``str.lower``).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence

import xxhash

from core.minhash_config import TOKENS

_TOKEN_RE = re.compile(r"[A-Za-z0-9_\u0080-\U0010FFFF]+|[^ \t\n\r\f\v]")
_NON_WORD = re.compile(r"\W")


def tokenize(text: str, *, tokens: str = "code", lowercase: bool = False) -> list[str]:
    """The tokens of ``text`` (reference implementation of the kernel's tokenizers)."""
    if lowercase:
        text = text.lower()
    if tokens == "code":
        return _TOKEN_RE.findall(text)
    if tokens == "words":
        return _NON_WORD.split(text)
    raise ValueError(f"tokens={tokens!r} is not supported: choose one of {TOKENS}")


def shingles(
    text: str, ngram: int, *, tokens: str = "code", lowercase: bool = False
) -> list[tuple[str, ...]]:
    """The ``ngram``-token windows of ``text``, or its whole token sequence when shorter."""
    seq = tokenize(text, tokens=tokens, lowercase=lowercase)
    if len(seq) < ngram:
        return [tuple(seq)]
    return [tuple(seq[i : i + ngram]) for i in range(len(seq) - ngram + 1)]


def shingle_hash(shingle: Sequence[str]) -> int:
    """64-bit hash of one shingle: the reference for the numba kernel and the datasketch hashfunc."""
    words = [xxhash.xxh64_intdigest(t.encode("utf-8", "surrogatepass")) for t in shingle]
    return xxhash.xxh64_intdigest(struct.pack(f"<{len(words)}Q", *words))
