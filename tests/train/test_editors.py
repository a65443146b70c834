"""The model editors of the API-update benchmark on a tiny random Llama (CPU, seconds).

The tiny model's initializer range is 0.2 rather than 0.02 so its logits can move far enough
for a few optimisation steps to make greedy decoding produce a target exactly.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml
from editor_checks import LAYERS, changed, greedy, logits, one_thread, snapshot, tiny_llama  # noqa: F401 (one_thread: this module's fixture)

from core.editing import APIUpdate, EditExample, load_editor
from core.errors import ConfigError
from core.formats import FORMATS
from train.editors.ft_l import FTLEditor, FTLOptions
from train.editors.grace import GraceAdaptor, GRACEEditor, GRACEOptions
from train.editors.lora import LoRAEditor, LoRAOptions
from train.editors.prompt import PromptEditor
from train.modeling import train_tiny_tokenizer

EDITOR_CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "apiupdate" / "editor"
FMT = FORMATS["editcoder"]
CODE = [
    ("import math\nx = math.sqrt(4)\n", "Use the new integer square root", "x = math.isqrt(4)\n"),
    ("def total(values):\n    return sum(values)\n", "Return nothing", "pass\n"),
    ("import os\npath = os.path.join('a', 'b')\n", "Use pathlib", "path = Path('a') / 'b'\n"),
    ("s = 'hello'\nprint(s.upper())\n", "Shout it", "print(s.upper() + '!')\n"),
    ("x = 1\n", "Make x two", "x = 2\n"),
]
PROMPTS = [FMT.prompt(before, instruction) for before, instruction, _ in CODE]


def update(i: int, api_id: str | None = None, target: str | None = None) -> APIUpdate:
    example = EditExample(PROMPTS[i], CODE[i][2] if target is None else target)
    return APIUpdate(api_id or f"api{i}/R1", f"notice {i}", (example,))


@pytest.fixture(scope="module")
def tok():
    texts = [prompt + after for prompt, (_, _, after) in zip(PROMPTS, CODE, strict=True)] * 3
    tokenizer = train_tiny_tokenizer(texts, vocab_size=300)
    tokenizer.padding_side = "left"  # as evaluation generates
    return tokenizer


@pytest.fixture
def model(tok):
    return tiny_llama(tok)


# ------------------------------------------------------------------------------------------ FT-L
DOWN = "model.layers.{}.mlp.down_proj.weight"


def test_ft_l_changes_one_matrix_within_delta_and_learns_the_target(model, tok):
    before = snapshot(model)
    editor = FTLEditor(model, tok, FTLOptions(layer=1, lr=1e-2, delta=0.5, steps=30))
    stats = editor.edit(update(0))
    assert changed(model, before) == {DOWN.format(1)}
    assert all(p.requires_grad for p in model.parameters())  # flags as built
    change = (model.get_submodule("model.layers.1.mlp.down_proj").weight - before[DOWN.format(1)]).abs().max()
    assert change <= 0.5 + 1e-6 and stats["max_abs_delta"] == pytest.approx(change.item())
    assert stats["steps"] == 30 and stats["loss"] < 1.0
    assert greedy(editor.model, tok, PROMPTS[0]) == CODE[0][2]
    assert editor.notice() == ""


def test_ft_l_edits_accumulate_within_one_budget_and_reset_restores(model, tok):
    before = snapshot(model)
    name, delta = DOWN.format(2), 2e-3
    weight = model.get_submodule("model.layers.2.mlp.down_proj").weight
    editor = FTLEditor(model, tok, FTLOptions(layer=2, lr=1e-2, delta=delta, steps=10))
    assert editor.edit(update(0))["max_abs_delta"] == pytest.approx(delta, rel=1e-4)  # the bound binds
    first = weight.detach().clone()
    editor.edit(update(2))
    assert not torch.equal(weight, first)
    assert (weight - before[name]).abs().max() <= delta + 1e-6  # one budget from W0, not from W1
    alone = tiny_llama(tok)
    FTLEditor(alone, tok, FTLOptions(layer=2, lr=1e-2, delta=delta, steps=10)).edit(update(2))
    assert not torch.equal(weight, alone.get_submodule("model.layers.2.mlp.down_proj").weight)

    editor.reset()
    assert changed(model, before) == set()


def test_ft_l_names_the_layer_count_when_layer_is_out_of_range(model, tok):
    with pytest.raises(ValueError, match=f"{LAYERS} decoder layers"):
        FTLEditor(model, tok, FTLOptions(layer=LAYERS))
    with pytest.raises(ValueError, match="module=.mlp.nope.: decoder layer 0 has no such module"):
        FTLEditor(model, tok, FTLOptions(layer=0, module="mlp.nope"))


# ------------------------------------------------------------------------------------------ LoRA
def test_lora_trains_only_the_adapter_and_reset_gives_the_original_logits(model, tok):
    original = logits(model, tok, PROMPTS[0])
    editor = LoRAEditor(model, tok, LoRAOptions(lr=1e-2, steps=30))
    before = snapshot(editor.model)
    stats = editor.edit(update(0))
    moved = changed(editor.model, before)
    assert moved and all("lora_" in name for name in moved)
    assert stats["max_abs_delta"] > 0 and stats["steps"] == 30
    assert greedy(editor.model, tok, PROMPTS[0]) == CODE[0][2]
    editor.edit(update(2))  # a second edit trains the same adapter on
    editor.reset()
    assert changed(editor.model, before) == set()
    assert torch.equal(logits(editor.model, tok, PROMPTS[0]), original)


# ----------------------------------------------------------------------------------------- GRACE
def keys(model, tok, prompts: list[str], layer: int = 0) -> torch.Tensor:
    """The input of layer `layer`'s down-projection at each prompt's last token (GRACE's query)."""
    seen = []
    hook = model.get_submodule(f"model.layers.{layer}.mlp.down_proj").register_forward_hook(
        lambda module, args, out: seen.append(args[0][0, -1])
    )
    for prompt in prompts:
        logits(model, tok, prompt)
    hook.remove()
    return torch.stack(seen)


def sample(model, tok, prompts: list[str], **kwargs):
    inputs = tok(prompts, return_tensors="pt", padding=True)
    assert (inputs["attention_mask"] == 0).any()  # the batch really is left-padded
    with torch.no_grad():
        out = model.generate(
            **inputs, max_new_tokens=8, return_dict_in_generate=True, output_logits=True, **kwargs
        )
    return inputs["input_ids"].shape[1], out


def test_grace_edits_only_prompts_within_the_radius(model, tok):
    edited, other = 4, 3  # "x = 2" is short enough for one value vector to produce
    k = keys(model, tok, [PROMPTS[edited], PROMPTS[other]])
    epsilon = 0.5 * (k[0] - k[1]).norm().item()
    original_other = logits(model, tok, PROMPTS[other])
    unedited = tiny_llama(tok)
    greedy_before = sample(unedited, tok, [PROMPTS[edited], PROMPTS[other]], do_sample=False)[1]
    torch.manual_seed(7)
    sampled_before = sample(
        unedited, tok, [PROMPTS[other], PROMPTS[edited]], do_sample=True, num_return_sequences=2
    )

    editor = GRACEEditor(model, tok, GRACEOptions(layer=0, epsilon=epsilon, n_iter=100, lr=1.0))
    stats = editor.edit(update(edited))
    assert isinstance(model.get_submodule("model.layers.0.mlp.down_proj"), GraceAdaptor)
    assert stats["entries"] == 1 and stats["new_entries"] == 1
    assert greedy(editor.model, tok, PROMPTS[edited]) == CODE[edited][2]
    assert torch.equal(logits(editor.model, tok, PROMPTS[other]), original_other)
    assert not torch.equal(logits(editor.model, tok, PROMPTS[edited]), logits(unedited, tok, PROMPTS[edited]))

    # generate, KV cache on, left-padded: the edited row gives its target, the other is untouched
    width, out = sample(editor.model, tok, [PROMPTS[edited], PROMPTS[other]], do_sample=False)
    new = out.sequences[0, width:].tolist()
    assert tok.decode(new[: new.index(tok.eos_token_id)]) == CODE[edited][2]
    steps = min(len(out.logits), len(greedy_before.logits))
    assert steps > 1 and all(torch.equal(out.logits[s][1], greedy_before.logits[s][1]) for s in range(steps))
    assert torch.equal(out.sequences[1, : width + steps], greedy_before.sequences[1, : width + steps])
    # sampling, rows expanded before the prompt's forward (num_return_sequences): the same holds
    torch.manual_seed(7)
    out = sample(
        editor.model, tok, [PROMPTS[other], PROMPTS[edited]], do_sample=True, num_return_sequences=2
    )[1]
    steps = min(len(out.logits), len(sampled_before[1].logits))
    for row in (0, 1):  # the other prompt's two samples
        assert all(torch.equal(out.logits[s][row], sampled_before[1].logits[s][row]) for s in range(steps))
    for row in (2, 3):  # the edited prompt's two samples: its value replaced the output
        assert not torch.equal(out.logits[0][row], sampled_before[1].logits[0][row])


def test_grace_splits_radii_on_a_conflict_and_reset_removes_the_wrapper(model, tok):
    first, second = 4, 1
    k = keys(model, tok, [PROMPTS[first], PROMPTS[second]])
    distance = (k[0] - k[1]).norm().item()
    original = logits(model, tok, PROMPTS[first])
    editor = GRACEEditor(model, tok, GRACEOptions(layer=0, epsilon=0.75 * distance, n_iter=100, lr=1.0))
    editor.edit(update(first))
    again = editor.edit(update(first))  # the same update again: its own entry is reused
    assert again["new_entries"] == 0 and again["splits"] == 0
    stats = editor.edit(update(second))  # another update within epsilon + r: split
    adaptor = editor.adaptor
    assert stats["splits"] == 1 and adaptor.owners == ["api4/R1", "api1/R1"]
    assert adaptor.radii.tolist() == pytest.approx([distance / 2] * 2, rel=1e-5)
    assert greedy(editor.model, tok, PROMPTS[first]) == CODE[first][2]
    assert greedy(editor.model, tok, PROMPTS[second]) == CODE[second][2]

    editor.reset()
    assert isinstance(model.get_submodule("model.layers.0.mlp.down_proj"), torch.nn.Linear)
    assert torch.equal(logits(model, tok, PROMPTS[first]), original)
    assert editor.edit(update(first))["entries"] == 1  # an empty codebook again


# ---------------------------------------------------------------------------------------- prompt
def test_prompt_editor_accumulates_notices_and_changes_no_weight(model, tok):
    before = snapshot(model)
    editor = PromptEditor(model, tok)
    assert editor.notice() == ""
    editor.edit(update(0))
    editor.edit(update(2))
    assert editor.notice() == "API updates:\n\nnotice 0\n\nnotice 2"
    assert editor.model is model and changed(model, before) == set()
    editor.reset()
    assert editor.notice() == ""


# ------------------------------------------------------------------------------- loading, configs
def test_load_editor_builds_an_editor_and_rejects_bad_targets_and_options(model, tok):
    editor = load_editor("train.editors.ft_l:FTLEditor", model, tok, {"layer": 1, "steps": 2})
    assert isinstance(editor, FTLEditor) and editor.steps == 2
    with pytest.raises(ConfigError, match="cannot be loaded"):
        load_editor("train.editors.ft_l:NoSuchEditor", model, tok)
    with pytest.raises(ConfigError, match="bogus"):
        load_editor("train.editors.ft_l:FTLEditor", model, tok, {"layer": 1, "bogus": 3})


@pytest.mark.parametrize("path", sorted(EDITOR_CONFIGS.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_editor_config_builds_its_editor(path, tok):
    config = yaml.safe_load(path.read_text())
    assert set(config) == {"name", "target", "options"} and config["name"] == path.stem
    options = dict(config["options"])
    if "layer" in options:
        options["layer"] = LAYERS - 1  # the tiny model's depth
    if "layers" in options:
        options["layers"] = [LAYERS - 1]
    editor = load_editor(config["target"], tiny_llama(tok), tok, options)
    assert editor.name == config["name"]
