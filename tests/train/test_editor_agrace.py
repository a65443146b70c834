"""A-GRACE on a tiny random Llama (CPU): the encoder's fit, its checkpoint, and GRACE's guarantees.

Six "APIs" of three prompts each (the same code with other names and numbers) are the edit split.
The encoder is fitted once per module on layer 0 and shared as a checkpoint folder; each test
builds the same model again (same seed) and loads it. The tiny model's initializer range is 0.2 so
one value vector can move greedy decoding onto a short target (see tests/train/test_editors.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from editor_checks import LAYERS, greedy, logits, one_thread, snapshot, tiny_llama  # noqa: F401 (one_thread: this module's fixture)

from core.editing import APIUpdate, EditExample, LearnedEditor, load_editor
from core.errors import ConfigError
from core.formats import FORMATS
from train.editors.agrace import (
    ENCODER_META,
    ENCODER_WEIGHTS,
    AGRACEEditor,
    AGRACEOptions,
    MeanKeyAdaptor,
    contrastive_loss,
    contrastive_pairs,
)
from train.modeling import train_tiny_tokenizer

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "apiupdate" / "editor" / "a-grace.yaml"
FMT = FORMATS["editcoder"]
APIS = [  # api id, code with {v} and {n}, instruction, target
    ("math.sqrt/R1", "import math\n{v} = math.sqrt({n})\n", "Use the integer square root", "pass\n"),
    ("os.path.join/R1", "import os\n{v} = os.path.join('{n}', 'b')\n", "Use pathlib", "x = 2\n"),
    ("str.upper/S1", "{v} = 'hello {n}'\nprint({v}.upper())\n", "Shout it", "y = 3\n"),
    ("sum/S2", "def total({v}):\n    return sum({v}) + {n}\n", "Return nothing", "pass\n"),
    ("sorted/S3", "{v} = sorted([{n}, 2, 1], reverse=True)\n", "Sort ascending", "x = 1\n"),
    ("len/S4", "while len({v}) > {n}:\n    {v}.pop()\n", "Empty it", "y = 0\n"),
]
FILLS = [("x", 1), ("values", 7), ("items", 42)]
# encoder settings for six APIs: small batches and a larger rate than App. D's, margin beyond the radius
FIT = {"layer": 0, "margin": 2.0, "encoder_lr": 3e-3, "batch_size": 4, "epochs": 300, "val_fraction": 0.2}


def prompt(api: int, fill: int) -> str:
    _, code, instruction, _ = APIS[api]
    name, number = FILLS[fill]
    return FMT.prompt(code.format(v=name, n=number), instruction)


def update(api: int, fills: tuple[int, ...] = (0, 1, 2)) -> APIUpdate:
    examples = tuple(EditExample(prompt(api, f), APIS[api][3]) for f in fills)
    return APIUpdate(APIS[api][0], f"notice {api}", examples)


@pytest.fixture(scope="module")
def tok():
    texts = [prompt(a, f) + APIS[a][3] for a in range(len(APIS)) for f in range(len(FILLS))] * 3
    tokenizer = train_tiny_tokenizer(texts, vocab_size=300)
    tokenizer.padding_side = "left"  # as evaluation generates
    return tokenizer


@pytest.fixture(scope="module")
def fitted(tok, tmp_path_factory):
    """(checkpoint folder, fit figures, the fitted editor's keys of every prompt)."""
    out = tmp_path_factory.mktemp("agrace")
    editor = AGRACEEditor(tiny_llama(tok), tok, AGRACEOptions(**FIT))
    figures = editor.fit([update(a) for a in range(len(APIS))], out)
    return out, figures, editor.keys(all_prompts())


def all_prompts() -> list[str]:
    return [prompt(a, f) for a in range(len(APIS)) for f in range(len(FILLS))]


@pytest.fixture
def editor(tok, fitted):
    return AGRACEEditor(tiny_llama(tok), tok, AGRACEOptions(layer=0, n_iter=100, checkpoint=str(fitted[0])))


# ------------------------------------------------------------------------------------------ fit
def test_fit_separates_apis_by_the_margin_and_writes_a_checkpoint(tok, fitted):
    out, figures, keys = fitted
    meta = json.loads((out / ENCODER_META).read_text())
    assert (out / ENCODER_WEIGHTS).is_file() and meta["module"] == "model.layers.0.mlp.down_proj"
    assert meta["encoder"] == {
        "in_dim": 256,
        "hidden_dim": 64,
        "out_dim": 256,
        "negative_slope": 0.5,
        "dropout": 0.0,
    }
    held_out = set(meta["held_out"])
    assert len(held_out) == 1
    train = [a for a in range(len(APIS)) if APIS[a][0] not in held_out]
    rows = [(a, i) for a in train for i in range(len(FILLS))]
    distances = torch.cdist(keys, keys)
    n = len(FILLS)  # keys are in all_prompts() order: API by API
    same = [distances[a * n + i, b * n + j] for a, i in rows for b, j in rows if a == b and i < j]
    other = [distances[a * n + i, b * n + j] for a, i in rows for b, j in rows if a < b]
    assert torch.stack(other).mean() - torch.stack(same).mean() >= FIT["margin"]


def test_fit_stops_early_and_keeps_the_best_validation_epoch(fitted):
    out, figures, keys = fitted
    assert figures["epochs"] == figures["best_epoch"] + 10 < FIT["epochs"]  # patience 10, App. D's
    split = contrastive_pairs([api for api, *_ in APIS for _ in FILLS], FIT["val_fraction"], seed=0)
    assert list(split.held_out) == json.loads((out / ENCODER_META).read_text())["held_out"]
    val = split.val  # the kept encoder's validation loss is the best one, not the last epoch's
    loss = contrastive_loss(keys[val[:, 0]], keys[val[:, 1]], val[:, 2].float(), FIT["margin"])
    assert loss.item() == pytest.approx(figures["val_loss"], rel=1e-5)


def test_a_checkpoint_gives_identical_keys(tok, fitted):
    out, _, keys = fitted
    loaded = AGRACEEditor(tiny_llama(tok), tok, AGRACEOptions(layer=0, checkpoint=str(out)))
    assert loaded.fitted and torch.equal(loaded.keys(all_prompts()), keys)
    with pytest.raises(
        ValueError, match="model.layers.0.mlp.down_proj .* not of model.layers.1.mlp.down_proj"
    ):
        AGRACEEditor(tiny_llama(tok), tok, AGRACEOptions(layer=1, checkpoint=str(out)))


def test_edit_before_fit_and_fit_on_too_few_apis_are_clear_errors(tok, tmp_path, editor):
    unfitted = AGRACEEditor(tiny_llama(tok), tok, AGRACEOptions(layer=0))
    assert not unfitted.fitted
    with pytest.raises(ValueError, match=r"not trained: call fit\(updates, out\).*or .*checkpoint="):
        unfitted.edit(update(0))
    with pytest.raises(ValueError, match="at least three modified APIs"):
        unfitted.fit([update(0), update(1)], tmp_path)
    editor.edit(update(0, (0,)))
    with pytest.raises(ValueError, match=r"call reset\(\) first"):
        editor.fit([update(a) for a in range(len(APIS))], tmp_path)


# ----------------------------------------------------------------------------------------- edits
def test_an_edit_gives_its_target_alone_and_in_a_left_padded_batch(tok, editor):
    edited, other = prompt(4, 0), prompt(1, 1)
    unedited = tiny_llama(tok)
    assert greedy(unedited, tok, edited) != APIS[4][3]
    stats = editor.edit(update(4, (0,)))
    assert stats["entries"] == 1 and isinstance(
        editor.model.get_submodule("model.layers.0.mlp.down_proj"), MeanKeyAdaptor
    )
    assert greedy(editor.model, tok, edited) == APIS[4][3]

    # KV cache on, the edited prompt left-padded: its key is the mean over its own tokens alone
    inputs = tok([edited, other], return_tensors="pt", padding=True)
    assert inputs["attention_mask"][0, 0] == 0  # the edited row really is padded
    with torch.no_grad():
        out = editor.model.generate(
            **inputs, do_sample=False, max_new_tokens=8, output_logits=True, return_dict_in_generate=True
        )
        before = unedited.generate(
            **inputs, do_sample=False, max_new_tokens=8, output_logits=True, return_dict_in_generate=True
        )
    assert torch.allclose(editor.adaptor.queries[0], editor.keys([edited])[0], atol=1e-4)
    new = out.sequences[0, inputs["input_ids"].shape[1] :].tolist()
    assert tok.decode(new[: new.index(tok.eos_token_id)]) == APIS[4][3]
    assert all(torch.equal(out.logits[s][1], before.logits[s][1]) for s in range(len(before.logits)))


def test_prompts_outside_the_radius_keep_their_logits_bit_for_bit(tok, editor):
    edited, others = prompt(4, 0), [prompt(a, 2) for a in (0, 1, 2, 3, 5)]
    keys = editor.keys([edited, *others])
    assert ((keys[1:] - keys[0]).norm(dim=-1) > editor.epsilon).all()  # the encoder put them outside
    original = [logits(editor.model, tok, p) for p in others]
    editor.edit(update(4, (0,)))
    assert all(torch.equal(logits(editor.model, tok, p), o) for p, o in zip(others, original, strict=True))
    assert not torch.equal(logits(editor.model, tok, edited), logits(tiny_llama(tok), tok, edited))


def test_only_the_adaptor_is_added_and_reset_restores_every_weight(tok, editor):
    model = editor.model
    before, params = snapshot(model), dict(model.named_parameters())
    original = logits(model, tok, prompt(4, 0))
    editor.edit(update(4, (0,)))
    added = {id(p) for p in model.parameters()} - {id(p) for p in params.values()}
    assert added == {id(p) for p in [*editor.adaptor.values, *editor.adaptor.encoder.parameters()]}
    assert all(torch.equal(p, before[name]) for name, p in params.items())

    editor.reset()
    assert type(model.get_submodule("model.layers.0.mlp.down_proj")) is torch.nn.Linear
    assert snapshot(model).keys() == before.keys()
    assert all(torch.equal(p, before[name]) for name, p in model.named_parameters())
    assert torch.equal(logits(model, tok, prompt(4, 0)), original)
    assert not model._forward_pre_hooks  # the mask hook went with the adaptor


def test_successive_edits_accumulate_in_the_codebook(tok, editor):
    first = editor.edit(update(4, (0,)))
    second = editor.edit(update(1, (0,)))
    assert (first["entries"], second["entries"]) == (1, 2) and editor.adaptor.owners == [
        "sorted/S3",
        "os.path.join/R1",
    ]
    assert greedy(editor.model, tok, prompt(4, 0)) == APIS[4][3]
    assert greedy(editor.model, tok, prompt(1, 0)) == APIS[1][3]


# ---------------------------------------------------------------------------------------- config
def test_the_config_builds_the_editor_with_the_papers_settings(tok, fitted):
    config = yaml.safe_load(CONFIG.read_text())
    assert set(config) == {"name", "target", "options"} and config["name"] == "a-grace"
    options = config["options"] | {"layer": LAYERS - 1}  # the tiny model's depth
    editor = load_editor(config["target"], tiny_llama(tok), tok, options)
    assert isinstance(editor, AGRACEEditor) and isinstance(editor, LearnedEditor) and not editor.fitted
    assert editor.name == "a-grace" and editor.target == "model.layers.2.mlp.down_proj"
    assert (editor.epsilon, editor.n_iter, editor.lr) == (1.0, 30, 1.0)
    settings = editor.settings
    assert (settings.out_dim, settings.margin, settings.epochs, settings.batch_size) == (256, 0.5, 100, 64)
    assert (settings.encoder_lr, settings.weight_decay, settings.patience, settings.dropout) == (
        1e-4,
        1e-4,
        10,
        0.0,
    )
    with pytest.raises(ConfigError, match="val_fraction=1"):
        load_editor(config["target"], tiny_llama(tok), tok, options | {"val_fraction": 1})
    loaded = load_editor(
        config["target"], tiny_llama(tok), tok, config["options"] | FIT | {"checkpoint": str(fitted[0])}
    )
    assert loaded.fitted
