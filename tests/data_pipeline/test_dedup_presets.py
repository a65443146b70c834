"""Dedup presets (configs/dedup/): composition, values, the reference tool's tokenization, a real build."""

from __future__ import annotations

import re
from itertools import tee

import datasketch
import numpy as np
import pytest
from conftest import build_commits, compose_build

from core.formats import FORMATS
from core.minhash_config import MinHashConfig
from core.neardup.minhash import minhash_signatures
from core.shingles import shingle_hash, shingles
from data_pipeline.build import to_build_config
from data_pipeline.config import DedupOptions
from data_pipeline.dedup_text import dedup_texts

EDITPACKFT_ORIGINAL = DedupOptions(
    enabled=True,
    text="formatted",
    minhash=MinHashConfig(
        num_perm=500, ngram=5, threshold=0.5, tokens="words", lowercase=True, exact_check=False
    ),
)


# --- The reference tool, restated literally. EditPackFT's near-dedup step is the submodule
# editpackft/code-dedup of nuprl/CanItEdit: cassanof/code-dedup at 5afd7a7 (a fork of
# ChenghaoMou/text-dedup), run by its minhash_dedup_hf.sh. From its text_dedup/minhash.py:
NON_ALPHA = re.compile(r"\W", re.UNICODE)


def code_dedup_shingles(content: str, ngram_size: int = 5, min_length: int = 5) -> set[bytes]:
    # embed_func: the shingle set before hashing (sha1, 32 bits, in the tool)
    return {
        bytes(" ".join(t).lower(), "utf-8") for t in ngrams(NON_ALPHA.split(content), ngram_size, min_length)
    }


# From its text_dedup/utils/tokenization.py (min_length defaults to 5 on the command line too).
def ngrams(sequence, n, min_length=5):
    if len(sequence) < min_length:
        return []
    if len(sequence) < n:
        return [tuple(sequence)]
    iterables = tee(iter(sequence), n)
    for i, sub_iterable in enumerate(iterables):
        for _ in range(i):
            next(sub_iterable, None)
    return zip(*iterables)  # noqa: B905


# --- end of the restatement


def edit_prompt(old: str, instr: str, new: str) -> str:
    """nuprl/CanItEdit editpackft/format.py, which builds the `content` column the dedup reads."""
    return f"## Code Before:\n{old}\n" + f"## Instruction:\n{instr}\n" + f"## Code After:\n{new}"


EXAMPLES = [
    ("def f(x):\n    return x+1\n", "Add one to the result", "def f(x):\n    return x + 2\n"),
    ("A = [1,2,3]\nprint(A[0])\n", "Print The LAST item", "A = [1,2,3]\nprint(A[-1])\n"),
    ("s = 'Straße'  # naïve — ok\n", "Use ß → ss", "s = 'Strasse'  # naive -- ok\n"),
    ("", "Create an empty module", "\n"),
]


def _preset(name: str, *overrides: str) -> DedupOptions:
    cfg = compose_build([f"dedup={name}", "source=files", "source.paths=[README.md]", *overrides])
    return to_build_config(cfg).pipeline.dedup


def test_editpackft_original_preset_composes_with_its_values():
    assert _preset("editpackft-original") == EDITPACKFT_ORIGINAL
    assert _preset("editpackft-original", "pipeline=commits2023raw") == EDITPACKFT_ORIGINAL  # dedup was off
    assert (
        _preset("editforge")
        == to_build_config(
            compose_build(["pipeline=editpackft", "source=files", "source.paths=[README.md]"])
        ).pipeline.dedup
    )


def test_without_a_preset_each_pipeline_keeps_its_own_dedup():
    raw = to_build_config(
        compose_build(["pipeline=commits2023raw", "source=files", "source.paths=[README.md]"])
    )
    assert raw.pipeline.dedup.enabled is False
    tuned = compose_build(
        [
            "dedup=editpackft-original",
            "pipeline.dedup.minhash.threshold=0.6",
            "source=files",
            "source.paths=[README.md]",
        ]
    )
    assert to_build_config(tuned).pipeline.dedup.minhash.threshold == 0.6  # a key override still wins


def test_bad_text_mode_is_a_config_error():
    from core.errors import ConfigError

    with pytest.raises(
        ConfigError, match=r"pipeline.dedup.text='prompt': choose one of \('edit', 'formatted'\)"
    ):
        _preset("editforge", "pipeline.dedup.text=prompt")
    with pytest.raises(ValueError, match="choose one of"):
        dedup_texts({"before": ["a"], "after": ["b"]}, "prompt")


def test_formatted_text_is_the_training_text():
    columns = {c: [row[i] for row in EXAMPLES] for i, c in enumerate(("before", "instruction", "after"))}
    fmt = FORMATS["editcoder"]
    assert dedup_texts(columns, "formatted") == [fmt.prompt(b, i) + fmt.completion(a) for b, i, a in EXAMPLES]
    assert dedup_texts(columns, "formatted") == [edit_prompt(b, i, a) for b, i, a in EXAMPLES]
    assert dedup_texts({"before": ["a"], "after": ["b"]}, "edit") == ["a\nb"]


@pytest.mark.parametrize("example", EXAMPLES)
def test_word_shingles_equal_the_reference_tool(example):
    text = edit_prompt(*example)
    ours = shingles(text, 5, tokens="words", lowercase=True)
    assert {" ".join(s).encode() for s in ours} == code_dedup_shingles(text)
    # So our signature is the MinHash of the tool's own shingle set (under our 64-bit hash).
    cfg = EDITPACKFT_ORIGINAL.minhash
    m = datasketch.MinHash(num_perm=cfg.num_perm, seed=cfg.seed, scheme=cfg.scheme, hashfunc=shingle_hash)
    m.update_batch([tuple(s.decode().split(" ")) for s in code_dedup_shingles(text)])
    np.testing.assert_array_equal(minhash_signatures([text], cfg)[0], m.hashvalues)


def test_documented_differences_from_the_reference_tool():
    # Under 5 tokens the tool keeps no shingle (all such texts share one signature); we keep one.
    assert code_dedup_shingles("x = 1") == set() and shingles("x = 1", 5, tokens="words") == [
        ("x", "", "", "1")
    ]
    # str.lower of the whole text, not of each n-gram: only U+0130 changes word class.
    text = "a b c d İx"
    assert {
        " ".join(s).encode() for s in shingles(text, 5, tokens="words", lowercase=True)
    } != code_dedup_shingles(text)


def test_build_with_the_editpackft_original_preset_records_it(tmp_path):
    bodies = [
        "def area(width, height):\n    return width * height\n",
        "import os\n\nfor name in os.listdir('.'):\n    print(name.upper())\n",
        "class Stack:\n    def __init__(self):\n        self.items = []\n",
    ]
    manifest = build_commits(tmp_path, bodies, ["dedup=editpackft-original"])
    expected = MinHashConfig(num_perm=500, threshold=0.5, tokens="words", lowercase=True).as_manifest()
    assert {k: manifest["minhash"][k] for k in expected} == expected
    assert manifest["config"]["pipeline"]["dedup"]["text"] == "formatted"
    assert 3 <= manifest["kept"] < manifest["input"] == 6  # the three changes, each made twice
