"""Retrieval of API knowledge bundles for a task description: BM25 and dense encoders, one `search` API.

A bundle is `{"qualname", "library", "S": {name, signature, params, returns}, "E": [{code, output}],
"M": {prose, code}}`. The data pipeline (RAFT hard negatives) and evaluation (retrieval-augmented
prompts) must rank bundles the same way, so both retrievers live here. Nothing heavy is imported at
module level (numpy, bm25s, torch and transformers load inside the methods that use them).
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable, Sequence
from typing import Any, Protocol

from core.errors import ConfigError, UserError

DocId = Hashable
Docs = Iterable[tuple[DocId, str]]

RETRIEVERS = ("bm25", "dense")


def document_text(bundle: dict[str, Any]) -> str:
    """The text a bundle is indexed by: what a task description can match (names, signature, param
    descriptions, prose, code). Example outputs are left out: values, not vocabulary."""
    spec = bundle.get("S") or {}
    parts = [bundle.get("qualname", ""), spec.get("name", ""), spec.get("signature", "")]
    for param in spec.get("params") or []:
        parts.append(" ".join(str(param.get(key) or "") for key in ("name", "type", "description")))
    parts.append(str(spec.get("returns") or ""))
    about = bundle.get("M") or {}
    parts += [about.get("prose", ""), about.get("code", "")]
    parts += [example.get("code", "") for example in bundle.get("E") or []]
    return "\n".join(p for p in parts if p)


# ------------------------------------------------------------------------------------------ tokenizer
_IDENTIFIER = re.compile(r"[A-Za-z0-9_]+")
# camelCase / PascalCase / acronym boundaries: "parseHTTPResponse2" -> parse, HTTP, Response, 2
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def code_tokens(text: str, stopwords: frozenset[str] = frozenset()) -> list[str]:
    """Lower-cased tokens of prose and code: each identifier whole (`read_csv`) and split into its
    parts (`read`, `csv`; camelCase and dots too), so a description's words meet an API's names."""
    tokens: list[str] = []
    for identifier in _IDENTIFIER.findall(text):
        parts = [w.lower() for piece in identifier.split("_") for w in _WORD.findall(piece)]
        whole = identifier.strip("_").lower()
        if len(parts) > 1 and whole:
            tokens.append(whole)
        tokens += [p for p in parts if p not in stopwords]
    return tokens


# ------------------------------------------------------------------------------------------ retrievers
class Retriever(Protocol):
    def search(self, query: str, k: int) -> list[tuple[DocId, float]]: ...


def _id_order(ids: Sequence[DocId]) -> list[int]:
    """Rank of each id in sorted order: the deterministic tie-break between equal scores."""
    try:
        order = sorted(range(len(ids)), key=lambda i: ids[i])  # type: ignore[arg-type, return-value]
    except TypeError:  # mixed id types
        order = sorted(range(len(ids)), key=lambda i: (type(ids[i]).__name__, str(ids[i])))
    rank = [0] * len(ids)
    for position, i in enumerate(order):
        rank[i] = position
    return rank


def _split_docs(docs: Docs) -> tuple[list[DocId], list[str]]:
    ids, texts = [], []
    for doc_id, text in docs:
        ids.append(doc_id)
        texts.append(text)
    if len(set(ids)) != len(ids):
        raise ValueError("retriever documents have duplicate ids")
    return ids, texts


def _top_k(ids: list[DocId], rank: Any, scores: Any, k: int) -> list[tuple[DocId, float]]:
    """The k best (id, score), best first; equal scores ordered by id."""
    import numpy as np

    order = np.lexsort((rank, -np.asarray(scores, dtype=np.float64)))[: max(k, 0)]
    return [(ids[i], float(scores[i])) for i in order]


class BM25Retriever:
    """Okapi BM25 (bm25s, Lucene variant) over code-aware tokens; offline and deterministic."""

    def __init__(self, docs: Docs, k1: float = 1.5, b: float = 0.75, stopwords: bool = True):
        try:
            import bm25s
            from bm25s.stopwords import STOPWORDS_EN
        except ImportError as err:
            raise UserError("the BM25 retriever needs bm25s: pip install bm25s") from err
        import numpy as np

        self.ids, texts = _split_docs(docs)
        if not self.ids:
            raise ValueError("BM25Retriever needs at least one document")
        self._rank = np.asarray(_id_order(self.ids))
        self._stopwords = frozenset(STOPWORDS_EN) if stopwords else frozenset()
        self._bm25 = bm25s.BM25(k1=k1, b=b, method="lucene")
        corpus = [code_tokens(t, self._stopwords) for t in texts]
        self._bm25.index(corpus, show_progress=False)

    def scores(self, query: str) -> Any:
        """BM25 score of every document (numpy array, in the order the documents were given)."""
        import numpy as np

        token_ids = self._bm25.get_tokens_ids(code_tokens(query, self._stopwords))
        if not token_ids:  # nothing of the query is in the vocabulary: every document scores 0
            return np.zeros(len(self.ids), dtype=np.float32)
        return self._bm25.get_scores_from_ids(token_ids)

    def search(self, query: str, k: int) -> list[tuple[DocId, float]]:
        return _top_k(self.ids, self._rank, self.scores(query), k)


class DenseRetriever:
    """A transformers encoder (hub id or local path): mean pooling over the attention mask,
    L2-normalised, cosine similarity. `query_prefix`/`doc_prefix` serve encoders trained with
    them (E5: "query: ", "passage: ")."""

    def __init__(
        self,
        docs: Docs,
        model: str,
        batch_size: int = 32,
        max_length: int = 512,
        device: str | None = None,
        query_prefix: str = "",
        doc_prefix: str = "",
        trust_remote_code: bool = False,
    ):
        import numpy as np
        import torch
        from transformers import AutoModel, AutoTokenizer

        self.ids, texts = _split_docs(docs)
        if not self.ids:
            raise ValueError("DenseRetriever needs at least one document")
        self._rank = np.asarray(_id_order(self.ids))
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.tokenizer = AutoTokenizer.from_pretrained(model, trust_remote_code=trust_remote_code)
        self.model = AutoModel.from_pretrained(model, trust_remote_code=trust_remote_code)
        self.model.to(self.device).eval()
        limits = [max_length, getattr(self.tokenizer, "model_max_length", max_length)]
        limits.append(getattr(self.model.config, "max_position_embeddings", max_length))
        self.max_length = min(int(x) for x in limits)
        self.batch_size = batch_size
        self.query_prefix, self.doc_prefix = query_prefix, doc_prefix
        self.embeddings = self.encode([doc_prefix + t for t in texts])

    def encode(self, texts: list[str]) -> Any:
        """L2-normalised mean-pooled embeddings, one row per text (float32 CPU tensor)."""
        import torch

        rows = []
        with torch.inference_mode():
            for start in range(0, len(texts), self.batch_size):
                batch = self.tokenizer(
                    texts[start : start + self.batch_size],
                    padding=True,
                    truncation=True,
                    max_length=self.max_length,
                    return_tensors="pt",
                ).to(self.device)
                hidden = self.model(**batch).last_hidden_state
                mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                rows.append(torch.nn.functional.normalize(pooled.float(), dim=-1).cpu())
        return torch.cat(rows)

    def scores(self, query: str) -> Any:
        """Cosine similarity of every document to the query (numpy array, in document order)."""
        query_vector = self.encode([self.query_prefix + query])[0]
        return (self.embeddings @ query_vector).numpy()

    def search(self, query: str, k: int) -> list[tuple[DocId, float]]:
        return _top_k(self.ids, self._rank, self.scores(query), k)


def make_retriever(kind: str, docs: Docs, model: str | None = None, **options: Any) -> Retriever:
    """`bm25` (model ignored) or `dense` (model: hub id or local path); `options` go to the class."""
    if kind == "bm25":
        return BM25Retriever(docs, **options)
    if kind == "dense":
        if not model:
            raise ConfigError("the dense retriever needs a model: a hub id or a local path")
        return DenseRetriever(docs, model, **options)
    raise ConfigError(f"unknown retriever kind {kind!r}; choose one of {', '.join(RETRIEVERS)}")
