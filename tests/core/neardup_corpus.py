"""A corpus of code-like files with near-duplicates at known distances, for the near-dedup tests."""

from __future__ import annotations

import functools
import random
from itertools import combinations

from core.shingles import shingles

WORDS = [
    f"{a}{b}"
    for a in ("get", "set", "load", "parse", "emit", "fold", "scan")
    for b in ("_x", "Row", "_id", "Buf", "_tmp", "Key")
]
FORMS = ["{} = {}({}, {})", "if {} > {}:", "return {}[{}] + {}", "for {} in {}.{}():", "{}.{} = {} * {}"]


def _line(rng: random.Random) -> str:
    form = rng.choice(FORMS)
    args = [
        rng.choice(WORDS) if rng.random() < 0.7 else str(rng.randrange(1000)) for _ in range(form.count("{}"))
    ]
    return "    " * rng.randrange(3) + form.format(*args)


def _edited(lines: list[str], edits: int, rng: random.Random) -> list[str]:
    out = list(lines)
    for _ in range(edits):
        out[rng.randrange(len(out))] = _line(rng)
    return out


@functools.cache
def corpus() -> tuple[list[str], list[str]]:
    """Ids and texts: 120 base files, exact copies, 1-edit copies (J > 0.9) and 15-edit copies (J < 0.55).

    Similarities stay away from the 0.7 threshold, where LSH is a coin flip by design.
    """
    rng = random.Random(7)
    bases = [[_line(rng) for _ in range(40)] for _ in range(120)]
    files = [*bases]
    for i, base in enumerate(bases):
        if i % 4 == 0:
            files.append(list(base))
        if i % 2 == 0:
            files.append(_edited(base, 1, rng))
        files.append(_edited(base, 15, rng))
    order = list(range(len(files)))
    rng.shuffle(order)
    return [f"ex-{k}" for k in order], ["\n".join(files[k]) for k in order]


@functools.cache
def exact_jaccards(ngram: int) -> dict[tuple[int, int], float]:
    """Exact shingle Jaccard of every pair of the corpus, from the reference tokenizer."""
    sets = [set(shingles(t, ngram)) for t in corpus()[1]]
    return {
        (i, j): len(sets[i] & sets[j]) / len(sets[i] | sets[j]) for i, j in combinations(range(len(sets)), 2)
    }
