"""Retrieval of API bundles: BM25 finds a bundle from its description; a dense encoder loads by path."""

from __future__ import annotations

import pytest

from core.errors import ConfigError
from core.retrieval import BM25Retriever, DenseRetriever, code_tokens, document_text, make_retriever

# (qualname, signature, params (name, type, description), description) of 20 made-up APIs
APIS = [
    (
        "geo.distance.haversine_km",
        "haversine_km(lat1, lon1, lat2, lon2)",
        [("lat1", "float", "latitude of the first point")],
        "Great-circle distance in kilometres between two coordinates on the earth.",
    ),
    (
        "textkit.slug.make_slug",
        "make_slug(title, sep='-')",
        [("sep", "str", "separator placed between words")],
        "Turn a title into a lowercase URL slug without punctuation.",
    ),
    (
        "tabular.io.readCsvFrame",
        "readCsvFrame(path, delimiter=',')",
        [("delimiter", "str", "column delimiter character")],
        "Load a comma separated values file into a table of rows and columns.",
    ),
    (
        "imaging.ops.resize_image",
        "resize_image(img, width, height)",
        [("width", "int", "target width in pixels")],
        "Scale a picture to new pixel dimensions with bilinear interpolation.",
    ),
    (
        "cryptox.hashing.sha_digest",
        "sha_digest(data, rounds=1)",
        [("rounds", "int", "how many times to hash")],
        "Compute a secure hash digest of bytes, optionally hashing repeatedly.",
    ),
    (
        "timeutil.parse.parse_iso_date",
        "parse_iso_date(text)",
        [("text", "str", "an ISO 8601 timestamp")],
        "Parse an ISO 8601 timestamp string into a timezone aware datetime.",
    ),
    (
        "netkit.http.fetch_json",
        "fetch_json(url, timeout=10)",
        [("timeout", "float", "seconds before giving up")],
        "Download a URL over HTTP and decode the JSON response body.",
    ),
    (
        "mathx.stats.rolling_mean",
        "rolling_mean(values, window)",
        [("window", "int", "number of samples averaged")],
        "Moving average of a numeric series over a sliding window.",
    ),
    (
        "audio.fx.normalize_volume",
        "normalize_volume(samples, peak=1.0)",
        [("peak", "float", "loudest allowed amplitude")],
        "Rescale audio samples so the loudest sound reaches the target peak amplitude.",
    ),
    (
        "graphs.search.shortest_path",
        "shortest_path(graph, source, target)",
        [("graph", "dict", "adjacency mapping of weighted edges")],
        "Dijkstra shortest route between two nodes of a weighted graph.",
    ),
    (
        "strutil.case.toSnakeCase",
        "toSnakeCase(name)",
        [("name", "str", "a camelCase identifier")],
        "Convert a camelCase identifier into snake_case with underscores.",
    ),
    (
        "archive.zipper.compress_folder",
        "compress_folder(path, level=6)",
        [("level", "int", "compression level from 0 to 9")],
        "Pack every file of a directory into a zip archive.",
    ),
    (
        "colorlib.convert.hex_to_rgb",
        "hex_to_rgb(code)",
        [("code", "str", "a colour like #ff8800")],
        "Translate a hexadecimal colour code into red green blue integers.",
    ),
    (
        "finance.loans.monthly_payment",
        "monthly_payment(principal, rate, years)",
        [("rate", "float", "annual interest rate")],
        "Fixed monthly instalment that repays a mortgage loan with interest.",
    ),
    (
        "bio.seq.reverse_complement",
        "reverse_complement(dna)",
        [("dna", "str", "nucleotide sequence of A C G T")],
        "Reverse complement of a DNA nucleotide strand.",
    ),
    (
        "units.temp.celsius_to_fahrenheit",
        "celsius_to_fahrenheit(c)",
        [("c", "float", "temperature in degrees Celsius")],
        "Convert a temperature from degrees Celsius to degrees Fahrenheit.",
    ),
    (
        "mailer.smtp.send_email",
        "send_email(to, subject, body)",
        [("subject", "str", "the message subject line")],
        "Deliver an email message to a recipient through an SMTP server.",
    ),
    (
        "cache.lru.memoize",
        "memoize(maxsize=128)",
        [("maxsize", "int", "entries kept before eviction")],
        "Decorator that caches function results with least recently used eviction.",
    ),
    (
        "matrix.linalg.invert_matrix",
        "invert_matrix(m)",
        [("m", "list", "a square matrix of floats")],
        "Inverse of a square matrix by Gaussian elimination.",
    ),
    (
        "langid.detect.guess_language",
        "guess_language(text)",
        [("text", "str", "a sentence in an unknown language")],
        "Guess which human language a sentence is written in.",
    ),
]


def synthetic_bundles() -> dict[str, dict]:
    """Bundles keyed by qualname, in the benchmark's shape (S, E, M)."""
    bundles = {}
    for qualname, signature, params, prose in APIS:
        func = qualname.rsplit(".", 1)[1]
        bundles[qualname] = {
            "qualname": qualname,
            "library": qualname.split(".")[0],
            "S": {
                "name": qualname,
                "signature": signature,
                "params": [{"name": n, "type": t, "default": None, "description": d} for n, t, d in params],
                "returns": "the result",
            },
            "E": [{"code": f"{func}(...)", "output": "..."}],
            "M": {"prose": prose, "code": ""},
        }
    return bundles


def docs() -> list[tuple[str, str]]:
    return [(q, document_text(b)) for q, b in synthetic_bundles().items()]


def test_document_text_holds_names_signature_params_prose_and_code():
    bundle = synthetic_bundles()["geo.distance.haversine_km"]
    text = document_text(bundle)
    for part in ("geo.distance.haversine_km", "haversine_km(lat1, lon1", "latitude of the first point"):
        assert part in text
    assert "Great-circle distance" in text and "haversine_km(...)" in text
    assert "..." not in text.replace("haversine_km(...)", "")  # example outputs are not indexed


def test_code_tokens_split_identifiers():
    tokens = code_tokens("lib.mod.readCSV_file parseHTTPResponse")
    assert {"lib", "mod", "read", "csv", "file", "readcsv_file", "parse", "http", "response"} <= set(tokens)
    assert tokens == [t.lower() for t in tokens]


@pytest.mark.parametrize("qualname", [q for q, *_ in APIS])
def test_bm25_ranks_the_described_bundle_first(qualname):
    retriever = BM25Retriever(docs())
    description = next(prose for q, _, _, prose in APIS if q == qualname)
    # a task description paraphrases the bundle's prose; the first half of it is enough
    words = description.split()
    hits = retriever.search(" ".join(words[: max(4, len(words) // 2)]), k=3)
    assert hits[0][0] == qualname


def test_bm25_matches_split_identifiers_and_breaks_ties_by_id():
    retriever = BM25Retriever(docs())
    assert retriever.search("to snake case", 1)[0][0] == "strutil.case.toSnakeCase"
    tied = BM25Retriever([("b", "same text"), ("a", "same text"), ("c", "other words")])
    assert [doc_id for doc_id, _ in tied.search("same", 3)] == ["a", "b", "c"]
    assert [doc_id for doc_id, _ in tied.search("unknownword", 2)] == ["a", "b"]  # all zero: by id


@pytest.fixture(scope="module")
def tiny_encoder(tmp_path_factory):
    """A 2-layer BERT with a WordPiece vocabulary trained on the bundles, saved like a hub model."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers import BertConfig, BertModel, BertTokenizerFast

    path = tmp_path_factory.mktemp("tiny-encoder")
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok.train_from_iterator(
        [t for _, t in docs()], trainers.WordPieceTrainer(vocab_size=400, special_tokens=special)
    )
    tokenizer = BertTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )
    tokenizer.save_pretrained(path)
    config = BertConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        vocab_size=tok.get_vocab_size(),
        max_position_embeddings=128,
    )
    BertModel(config).save_pretrained(path)
    return str(path)


def test_dense_retriever_loads_a_local_model_and_ranks(tiny_encoder):
    corpus = docs()
    retriever = make_retriever("dense", corpus, model=tiny_encoder, batch_size=7, device="cpu")
    hits = retriever.search("distance between two coordinates", k=5)
    assert len(hits) == 5 and len({doc_id for doc_id, _ in hits}) == 5
    scores = [s for _, s in hits]
    assert scores == sorted(scores, reverse=True) and all(-1.0001 <= s <= 1.0001 for s in scores)
    # a document's own text is its nearest neighbour (cosine 1)
    doc_id, text = corpus[3]
    assert retriever.search(text, 1)[0] == (doc_id, pytest.approx(1.0, abs=1e-5))


def test_dense_pooling_ignores_padding(tiny_encoder):
    """The same texts embed alike in batches of 1 (no padding) and of 20 (padded to the longest)."""
    import torch

    corpus = docs()
    one = DenseRetriever(corpus, tiny_encoder, batch_size=1, device="cpu").embeddings
    many = DenseRetriever(corpus, tiny_encoder, batch_size=20, device="cpu").embeddings
    torch.testing.assert_close(one, many, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(one.norm(dim=-1), torch.ones(len(corpus)))


def test_make_retriever_rejects_unknown_kinds_and_a_dense_without_model():
    with pytest.raises(ConfigError, match="unknown retriever kind 'tfidf'.*bm25, dense"):
        make_retriever("tfidf", docs())
    with pytest.raises(ConfigError, match="needs a model"):
        make_retriever("dense", docs())
    assert make_retriever("bm25", docs()).search("zip archive", 1)[0][0] == "archive.zipper.compress_folder"
