"""RAFT training contexts for the novel-API benchmark: the oracle bundle among distractors.

RAFT (Zhang et al. 2024, "RAFT: Adapting Language Model to Domain Specific RAG", arXiv:2403.10131)
trains on a question with k+1 documents: for a fraction P of the examples the golden ("oracle")
document plus k distractors, for the rest k+1 distractors and no oracle, so that the model learns
both to read the right document among wrong ones and not to depend on it being there. Every context
has k+1 documents, so its size never tells whether the oracle is in it.

Defaults (`RAFTConfig`): k=4 distractors, P=0.8. The paper describes its setup as one golden
document with four distractors, and its ablation over P found the best value dataset-dependent
rather than a universal one; the reference implementation (ShishirPatil/gorilla, raft/raft.py) builds
examples with p=0.8 (`add_chunk_to_dataset`'s default, which its command line does not override) and
3 distractors (`--distractors`).
Unlike that code, the no-oracle case draws k+1 distinct distractors (it replaced the oracle with
one more random chunk, which could repeat a distractor) and a distractor never has the oracle's text.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from core.errors import ConfigError
from core.retrieval import BM25Retriever, Retriever, document_text

NEGATIVES = ("random", "retrieved")
Bundles = Mapping[Hashable, dict[str, Any]]


@dataclass
class RAFTConfig:
    """`distractors`: k; `oracle_fraction`: P; `negatives`: `random` (uniform over the other bundles)
    or `retrieved` (hard negatives: the best-ranked non-oracle bundles for the task description,
    BM25 over the bundles unless a retriever is given); `seed`: the corpus's seed."""

    distractors: int = 4
    oracle_fraction: float = 0.8
    negatives: str = "random"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.distractors < 0:
            raise ConfigError(f"corpus.distractors must be >= 0, got {self.distractors}")
        if not 0.0 <= self.oracle_fraction <= 1.0:
            raise ConfigError(f"corpus.oracle_fraction must be in [0, 1], got {self.oracle_fraction}")
        if self.negatives not in NEGATIVES:
            raise ConfigError(
                f"corpus.negatives must be one of {', '.join(NEGATIVES)}, got {self.negatives!r}"
            )


class DocumentPool:
    """The bundles' ids (sorted, so sampling does not depend on dict order) and texts, computed once
    per corpus rather than once per example."""

    def __init__(self, bundles: Bundles):
        try:
            self.ids = sorted(bundles)
        except TypeError:
            self.ids = sorted(bundles, key=lambda i: (type(i).__name__, str(i)))
        self.texts = {i: document_text(bundles[i]) for i in self.ids}
        self.distinct_texts = len(set(self.texts.values()))

    def check(self, oracle_id: Hashable, needed: int) -> None:
        if oracle_id not in self.texts:
            raise KeyError(f"oracle bundle {oracle_id!r} is not among the bundles")
        available = self.distinct_texts - 1  # distinct texts other than the oracle's
        if available < needed:
            raise ValueError(
                f"RAFT needs {needed} distractors with distinct texts for {oracle_id!r} but the bundles "
                f"have {available}; lower corpus.distractors or add libraries with corpus.include"
            )


def _random_negatives(oracle_id: Hashable, n: int, pool: DocumentPool, rng: random.Random) -> list:
    """n uniformly drawn bundles, none with the oracle's text, no two with the same text. Rejection
    sampling: O(n) draws when the pool is much larger than n, not O(pool) per example."""
    banned = {pool.texts[oracle_id]}
    chosen: list = []
    while len(chosen) < n:
        doc_id = pool.ids[rng.randrange(len(pool.ids))]
        if pool.texts[doc_id] not in banned:
            banned.add(pool.texts[doc_id])
            chosen.append(doc_id)
    return chosen


def _retrieved_negatives(
    oracle_id: Hashable, n: int, pool: DocumentPool, retriever: Retriever, query: str
) -> list:
    """The n best-ranked bundles for `query` that are not the oracle (by id or text), no two alike."""
    k = n + 1
    while True:
        banned, chosen = {pool.texts[oracle_id]}, []
        hits = retriever.search(query, k)
        for doc_id, _ in hits:
            text = pool.texts.get(doc_id)
            if text is not None and text not in banned:
                banned.add(text)
                chosen.append(doc_id)
                if len(chosen) == n:
                    return chosen
        if len(hits) < k:  # the retriever has no more documents
            raise ValueError(f"the retriever found only {len(chosen)} of {n} distractors for {oracle_id!r}")
        k *= 2


def raft_context(
    oracle_id: Hashable,
    bundles: Bundles,
    config: RAFTConfig,
    rng: random.Random,
    retriever: Retriever | None = None,
    query: str | None = None,
    *,
    pool: DocumentPool | None = None,
) -> tuple[list, bool]:
    """The ids of one example's context, shuffled, and whether the oracle is among them: with
    probability P the oracle and k distractors, else k+1 distractors. `negatives="retrieved"`
    needs `retriever` and `query` (the task description). `pool` saves recomputing texts."""
    pool = pool or DocumentPool(bundles)
    with_oracle = rng.random() < config.oracle_fraction
    n = config.distractors if with_oracle else config.distractors + 1
    pool.check(oracle_id, n)
    if config.negatives == "retrieved":
        if retriever is None or query is None:
            raise ValueError("negatives='retrieved' needs a retriever and a query")
        ids = _retrieved_negatives(oracle_id, n, pool, retriever, query)
    else:
        ids = _random_negatives(oracle_id, n, pool, rng)
    if with_oracle:
        ids.append(oracle_id)
    rng.shuffle(ids)
    return ids, with_oracle


def render_documents(ids: list, bundles: Bundles, render: Callable[[dict[str, Any]], str]) -> str:
    """The context as the model reads it: each bundle rendered inside `<doc id=N>` ... `</doc>` on
    lines of their own, N = 1.. in context order (positions, not qualnames, so citing a document
    never needs its name). A `</doc>` inside a rendered bundle is written `<\\/doc>` so that the
    delimiters stay unambiguous."""
    blocks = []
    for position, doc_id in enumerate(ids, 1):
        body = render(bundles[doc_id]).replace("</doc>", "<\\/doc>")
        blocks.append(f"<doc id={position}>\n{body}\n</doc>")
    return "\n".join(blocks)


def task_rng(seed: int, task_id: Any) -> random.Random:
    """One RNG per (seed, task): a task's context does not depend on the other tasks or their order."""
    digest = hashlib.sha256(f"{seed}\x00{task_id}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def raft_examples(
    tasks: list[dict[str, Any]],
    bundles: Bundles,
    config: RAFTConfig,
    render: Callable[[dict[str, Any]], str],
    retriever: Retriever | None = None,
) -> list[dict[str, Any]]:
    """Each task (`id`, `qualname` = oracle bundle id, `description`, its code `context`, ...) with
    `context_ids`, `oracle_in_context` and `documents` (rendered; the task's own code `context` is
    kept, it is the example's code before the edit). Deterministic for a seed."""
    pool = DocumentPool(bundles)
    if config.negatives == "retrieved" and retriever is None:
        retriever = BM25Retriever([(i, pool.texts[i]) for i in pool.ids])
    examples = []
    for task in tasks:
        ids, with_oracle = raft_context(
            task["qualname"],
            bundles,
            config,
            task_rng(config.seed, task["id"]),
            retriever=retriever,
            query=task.get("description"),
            pool=pool,
        )
        documents = render_documents(ids, bundles, render)
        examples.append(
            {**task, "context_ids": ids, "oracle_in_context": with_oracle, "documents": documents}
        )
    return examples
