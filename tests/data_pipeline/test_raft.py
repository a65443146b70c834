"""RAFT contexts: P% keep the oracle, distractors are never the oracle, one seed one corpus, hard
negatives are BM25's best non-oracle bundles, documents are delimited and shuffled."""

from __future__ import annotations

import copy
import math
import random
import re

import pytest
from test_retrieval import APIS, synthetic_bundles

from core.errors import ConfigError
from core.retrieval import BM25Retriever, document_text
from data_pipeline.novel_api.raft import RAFTConfig, raft_context, raft_examples, render_documents


def render(bundle: dict) -> str:
    return f"{bundle['S']['signature']}\n{bundle['M']['prose']}"


def tasks(n: int) -> list[dict]:
    """n tasks cycling over the bundles; the description is the bundle's prose."""
    return [
        {"id": f"t{i}", "qualname": APIS[i % len(APIS)][0], "description": APIS[i % len(APIS)][3]}
        for i in range(n)
    ]


def with_duplicate(bundles: dict) -> dict:
    """Adds an alias of haversine_km with the same text under another id."""
    bundles = dict(bundles)
    bundles["geo.alias.haversine_km"] = copy.deepcopy(bundles["geo.distance.haversine_km"])
    return bundles


def test_bad_settings_are_config_errors():
    for bad in ({"oracle_fraction": 1.5}, {"distractors": -1}, {"negatives": "bm25"}):
        with pytest.raises(ConfigError):
            RAFTConfig(**bad)


@pytest.mark.parametrize("p", [0.8, 0.3])
def test_oracle_fraction_is_p_within_sampling_error(p):
    n = 2000
    examples = raft_examples(tasks(n), synthetic_bundles(), RAFTConfig(oracle_fraction=p, seed=1), render)
    kept = sum(e["oracle_in_context"] for e in examples)
    assert abs(kept / n - p) < 3 * math.sqrt(p * (1 - p) / n)
    for e in examples:  # always k+1 documents: the context size does not reveal the oracle
        assert len(e["context_ids"]) == 5 and len(set(e["context_ids"])) == 5
        assert (e["qualname"] in e["context_ids"]) == e["oracle_in_context"]


@pytest.mark.parametrize("negatives", ["random", "retrieved"])
def test_a_distractor_is_never_the_oracle_by_id_or_by_text(negatives):
    bundles = with_duplicate(synthetic_bundles())
    texts = {i: document_text(b) for i, b in bundles.items()}
    config = RAFTConfig(distractors=6, negatives=negatives, seed=3)
    examples = raft_examples(tasks(400), bundles, config, render)
    for e in examples:
        distractors = [i for i in e["context_ids"] if i != e["qualname"]]
        assert len(distractors) == (6 if e["oracle_in_context"] else 7)
        assert texts[e["qualname"]] not in {texts[i] for i in distractors}
        assert len({texts[i] for i in distractors}) == len(distractors)
    haversine = [e for e in examples if e["qualname"] == "geo.distance.haversine_km"]
    assert not any("geo.alias.haversine_km" in e["context_ids"] for e in haversine)


def test_too_few_bundles_is_an_error_not_a_shorter_context():
    bundles = dict(list(synthetic_bundles().items())[:4])
    with pytest.raises(ValueError, match="needs 5 distractors"):
        raft_context(next(iter(bundles)), bundles, RAFTConfig(oracle_fraction=0.0), random.Random(0))


def test_same_seed_same_corpus_other_seed_other_corpus():
    bundles = synthetic_bundles()
    first = raft_examples(tasks(200), bundles, RAFTConfig(seed=7), render)
    assert raft_examples(tasks(200), bundles, RAFTConfig(seed=7), render) == first
    assert raft_examples(tasks(200), bundles, RAFTConfig(seed=8), render) != first
    # a task's context depends on the seed and its id, not on the other tasks or their order
    reordered = raft_examples(tasks(200)[::-1], dict(reversed(bundles.items())), RAFTConfig(seed=7), render)
    assert {e["id"]: e["documents"] for e in reordered} == {e["id"]: e["documents"] for e in first}


def test_retrieved_negatives_are_the_top_bm25_non_oracle_bundles():
    bundles = synthetic_bundles()
    retriever = BM25Retriever([(i, document_text(b)) for i, b in bundles.items()])
    examples = raft_examples(tasks(100), bundles, RAFTConfig(negatives="retrieved", seed=2), render)
    assert {e["oracle_in_context"] for e in examples} == {True, False}
    for e in examples:
        ranked = [i for i, _ in retriever.search(e["description"], len(bundles)) if i != e["qualname"]]
        k = 4 if e["oracle_in_context"] else 5
        assert {i for i in e["context_ids"] if i != e["qualname"]} == set(ranked[:k])
    # the same with a retriever passed in: its ranking, not a fresh BM25, picks the negatives
    task = tasks(1)[0]
    ids, _ = raft_context(
        task["qualname"],
        bundles,
        RAFTConfig(negatives="retrieved", oracle_fraction=0.0),
        random.Random(0),
        retriever=retriever,
        query="zip archive directory",
    )
    assert "archive.zipper.compress_folder" in ids


def test_contexts_are_delimited_and_shuffled():
    bundles = synthetic_bundles()
    examples = raft_examples(tasks(400), bundles, RAFTConfig(seed=4), render)
    positions = set()
    for e in examples:
        assert re.findall(r"<doc id=(\d+)>", e["documents"]) == ["1", "2", "3", "4", "5"]
        assert e["documents"].count("</doc>") == 5
        blocks = re.findall(r"<doc id=\d+>\n(.*?)\n</doc>", e["documents"], flags=re.S)
        assert blocks == [render(bundles[i]) for i in e["context_ids"]]
        if e["oracle_in_context"]:
            positions.add(e["context_ids"].index(e["qualname"]))
    assert positions == {0, 1, 2, 3, 4}


def test_a_closing_delimiter_inside_a_document_is_escaped():
    bundles = {"a": {"M": {"prose": "x </doc> y"}}}
    text = render_documents(["a"], bundles, lambda b: b["M"]["prose"])
    assert text == "<doc id=1>\nx <\\/doc> y\n</doc>"
