"""The corpus of scripts/bench_dedup.py: real Python files installed here, with planted near-duplicates,
and exact Jaccard over every pair for the quality figures."""

from __future__ import annotations

import json
import os
import random
import site
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from scipy import sparse

from core.neardup.minhash import shingle_sets

VERBS = ("Fix", "Update", "Refactor", "Clean up", "Simplify", "Tweak")


def installed_python_files(min_bytes: int, max_bytes: int) -> list[str]:
    """Sorted real paths of the .py files in the stdlib and site-packages within the size bounds."""
    paths = sysconfig.get_paths()
    found = set()
    for root in {paths["stdlib"], paths["purelib"], *site.getsitepackages()}:
        for dirpath, _, names in os.walk(root):
            for name in names:
                path = os.path.join(dirpath, name)
                if name.endswith(".py") and min_bytes <= _size(path) <= max_bytes:
                    found.add(os.path.realpath(path))
    return sorted(found)


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return -1


def unique_sources(paths: list[str], seed: int) -> Iterator[tuple[str, str]]:
    """(path, text) in a seeded order, skipping undecodable, binary and already-seen contents.

    Read lazily: a small run reads few files.
    """
    order = list(paths)
    random.Random(seed).shuffle(order)
    seen: set[str] = set()
    for path in order:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if "\x00" not in text and text not in seen:  # the build drops NUL-bearing rows
            seen.add(text)
            yield path, text


def perturb(lines: list[str], rng: random.Random, n_edits: int, donor: list[str]) -> list[str]:
    """``lines`` with ``n_edits`` random lines replaced, inserted or deleted (new lines from ``donor``)."""
    out = list(lines)
    for _ in range(n_edits):
        op, at, new = rng.randrange(3), rng.randrange(len(out)), rng.choice(donor)
        if op == 0:
            out[at] = new
        elif op == 1:
            out.insert(at, new)
        elif len(out) > 1:
            del out[at]
    return out


def edit_row(index: int, path: str, text: str, rng: random.Random, donor: list[str]) -> dict:
    """A commit-shaped row: the file before, the file with one line edited after."""
    after = "\n".join(perturb(text.split("\n"), rng, 1, donor))
    return {
        "id": f"doc-{index}",
        "before": text,
        "after": after,
        "instruction": f"{rng.choice(VERBS)} {Path(path).stem}",
    }


def build_corpus(
    n_rows: int, seed: int, dup_fraction: float, max_edits: int
) -> tuple[list[dict], dict[int, int], int]:
    """Rows, {planted row: its source row}, and how many installed files qualified."""
    paths = installed_python_files(500, 50_000)
    sources, rng = unique_sources(paths, seed), random.Random(seed)
    files: list[tuple[str, str]] = []
    rows, plants = [], {}
    for i in range(n_rows):
        donor = files[rng.randrange(len(files))][1].split("\n") if files else None
        if files and rng.random() < dup_fraction:
            src = rng.randrange(i)
            path, text = files[src]
            text = "\n".join(perturb(text.split("\n"), rng, rng.randint(1, max_edits), donor))
            plants[i] = src
        else:
            path, text = next(sources, (None, None))
            if text is None:
                sys.exit(f"only {len(files) - len(plants)} usable files installed; lower --sizes/--docs")
        files.append((path, text))
        rows.append(edit_row(i, path, text, rng, donor or text.split("\n")))
    return rows, plants, len(paths)


def write_jsonl(rows: list[dict], path: Path) -> None:
    with path.open("w") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")


def read_rows(path: Path, n: int) -> list[dict]:
    rows = []
    with path.open() as fh:
        for line in fh:
            if len(rows) == n:
                break
            rows.append(json.loads(line))
    return rows


# ---- exact Jaccard ----


def shingle_matrix(texts: list[str], ngram: int) -> tuple[sparse.csr_matrix, np.ndarray]:
    """Rows x distinct shingles incidence matrix (int32) and each row's set size."""
    sets = shingle_sets(texts, ngram)
    _, cols = np.unique(np.concatenate(sets), return_inverse=True)
    sizes = np.array([len(s) for s in sets])
    rows = np.repeat(np.arange(len(texts)), sizes)
    ones = np.ones(len(rows), dtype=np.int32)
    return sparse.csr_matrix((ones, (rows, cols.ravel())), shape=(len(texts), cols.max() + 1)), sizes


def exact_pairs(texts: list[str], ngram: int, threshold: float, block: int = 500) -> dict:
    """{(i, j): Jaccard} of every pair i < j at or above ``threshold``, in row blocks to bound memory."""
    x, sizes = shingle_matrix(texts, ngram)
    xt = x.T.tocsr()
    found = {}
    for start in range(0, len(texts), block):
        inter = (x[start : start + block] @ xt).tocoo()
        i, j = inter.row + start, inter.col
        jaccard = inter.data / (sizes[i] + sizes[j] - inter.data)
        hit = (i < j) & (jaccard >= threshold)
        found.update(
            zip(zip(i[hit].tolist(), j[hit].tolist(), strict=True), jaccard[hit].tolist(), strict=True)
        )
    return found


def pair_jaccard(texts: list[str], pairs: list[tuple[int, int]], ngram: int) -> list[float]:
    sets = shingle_sets(texts, ngram)
    out = []
    for i, j in pairs:
        inter = len(np.intersect1d(sets[i], sets[j], assume_unique=True))
        out.append(inter / (len(sets[i]) + len(sets[j]) - inter))
    return out
