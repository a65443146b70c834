"""MALMEN on a tiny random Llama (CPU): meta-training, edits, reset, checkpoints, its config.

The tiny model is fitted with settings far from App. D's (lr 1e-3 instead of 1e-5, initial
edit step 1e-3 instead of 1e-6, rank 32 instead of 1920, 2 edits per batch instead of 4, 60 steps
instead of 1000): a random 3-layer model has no pretrained structure to lean on, and this keeps
the fit to a few seconds. One fit serves the whole file; its checkpoint builds the editors.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
import yaml
from editor_checks import changed, greedy, logits, one_thread, snapshot  # noqa: F401 (one_thread: this module's fixture)
from test_editors import CODE, FMT, LAYERS, PROMPTS, tiny_llama, update

from core.editing import APIUpdate, EditExample, LearnedEditor, load_editor
from core.errors import ConfigError
from train.editors.malmen import MALMENEditor, MALMENOptions, meta_batch
from train.editors.malmen_net import ridge_shift
from train.modeling import train_tiny_tokenizer

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "apiupdate" / "editor" / "malmen.yaml"
EDITED = [1, 2]
DOWN = "model.layers.{}.mlp.down_proj.weight"
TINY = {"layers": EDITED, "rank": 32, "lr": 1e-3, "edit_lr": 1e-3, "batch_size": 2, "steps": 60}
SHOUT = "print(s.upper() + '!')\n"
# one API with two examples, so fit holds one out for generalization
SHOUT_API = APIUpdate(
    "str.upper/S1",
    "notice 3",
    (EditExample(PROMPTS[3], SHOUT), EditExample(FMT.prompt("s = 'bye'\n", "Shout it"), SHOUT)),
)
FIT_UPDATES = [update(0), update(1), update(2), SHOUT_API, update(4)]
UNRELATED = FMT.prompt("y = [1, 2]\n", "Sort it")


@pytest.fixture(scope="module")
def tok():
    texts = [prompt + after for prompt, (_, _, after) in zip(PROMPTS, CODE, strict=True)] * 3
    tokenizer = train_tiny_tokenizer(texts, vocab_size=300)
    tokenizer.padding_side = "left"
    return tokenizer


@pytest.fixture(scope="module")
def fitted(tok, tmp_path_factory):
    """(the editor that was fitted, its checkpoint folder, fit's figures, whether fit left the
    model's weights bit for bit as they were)."""
    model = tiny_llama(tok)
    before = snapshot(model)
    editor = MALMENEditor(model, tok, MALMENOptions(**TINY))
    out = tmp_path_factory.mktemp("malmen")
    stats = editor.fit(FIT_UPDATES, out)
    return editor, out, stats, changed(model, before) == set()


def loaded(tok, checkpoint: Path, dtype: torch.dtype = torch.float32) -> MALMENEditor:
    return MALMENEditor(tiny_llama(tok).to(dtype), tok, MALMENOptions(**TINY, checkpoint=str(checkpoint)))


def down(editor: MALMENEditor, layer: int) -> torch.Tensor:
    return editor.model.get_submodule(f"model.layers.{layer}.mlp.down_proj").weight


def test_fit_learns_saves_and_an_edit_gives_the_target(fitted, tok):
    editor, out, stats, untouched = fitted
    assert untouched  # fit applies and removes its shifts exactly
    assert isinstance(editor, LearnedEditor) and editor.fitted
    assert {p.name for p in out.iterdir()} == {"malmen.pt", "malmen.json"}
    assert stats["steps"] == 60 and stats["gen_loss_last"] < 0.2 * stats["gen_loss_first"]
    fresh = loaded(tok, out)
    assert fresh.fitted and fresh.notice() == ""
    result = fresh.edit(update(4))
    assert result["loss_before"] > 3.0 and result["loss_after"] < 0.1
    assert greedy(fresh.model, tok, PROMPTS[4]) == CODE[4][2]


def test_an_edit_changes_only_the_named_layers_down_projections(fitted, tok):
    editor = loaded(tok, fitted[1])
    before = snapshot(editor.model)
    result = editor.edit(update(2))
    assert changed(editor.model, before) == {DOWN.format(layer) for layer in EDITED}
    moved = max((down(editor, layer) - before[DOWN.format(layer)]).abs().max().item() for layer in EDITED)
    assert result["max_abs_shift"] == pytest.approx(moved, abs=1e-5)


def next_token_kl(before: torch.Tensor, after: torch.Tensor) -> torch.Tensor:
    """KL(before ‖ after) of the next-token distribution at every position."""
    return F.kl_div(after.log_softmax(-1), before.log_softmax(-1), log_target=True, reduction="none").sum(-1)[
        0
    ]


def test_an_unrelated_prompt_keeps_its_next_token_distributions(fitted, tok):
    """Tolerance: the mean per-position KL(unedited ‖ edited) on a prompt seen neither in fit nor
    in the edit stays under 0.1 nats (measured 0.03-0.05 over fits of 60-200 steps): next-token
    distributions that close keep the greedy choice almost everywhere, while at the tokens where
    the edit should act it moves the distribution by 4-6 nats, asserted at least 10 times more."""
    editor = loaded(tok, fitted[1])
    target = FMT.prompt(*CODE[4][:2]) + CODE[4][2]
    unrelated_before, target_before = logits(editor.model, tok, UNRELATED), logits(editor.model, tok, target)
    editor.edit(update(4))
    unrelated = next_token_kl(unrelated_before, logits(editor.model, tok, UNRELATED)).mean()
    n_target = len(tok(CODE[4][2], add_special_tokens=False)["input_ids"])
    edited = next_token_kl(target_before, logits(editor.model, tok, target))[-n_target - 1 : -1].mean()
    assert unrelated < 0.1 and edited > 10 * unrelated


def test_reset_restores_every_weight_bit_for_bit(fitted, tok):
    editor = loaded(tok, fitted[1])
    before, original = snapshot(editor.model), logits(editor.model, tok, PROMPTS[0])
    editor.edit(update(4))
    editor.edit(SHOUT_API)
    assert changed(editor.model, before)
    editor.reset()
    assert changed(editor.model, before) == set()
    assert torch.equal(logits(editor.model, tok, PROMPTS[0]), original)


def test_successive_edits_accumulate_from_the_current_weights(fitted, tok):
    editor = loaded(tok, fitted[1])
    start = {layer: down(editor, layer).detach().clone() for layer in EDITED}
    editor.edit(update(4))
    first = {layer: down(editor, layer).detach().clone() for layer in EDITED}
    second = editor.edit(update(2))
    assert greedy(editor.model, tok, PROMPTS[4]) == CODE[4][2]
    assert greedy(editor.model, tok, PROMPTS[2]) == CODE[2][2]
    steps = {layer: down(editor, layer).detach() - first[layer] for layer in EDITED}
    assert max(step.abs().max().item() for step in steps.values()) == pytest.approx(
        second["max_abs_shift"], abs=1e-5
    )  # the second shift went onto the first edit's weights
    alone = loaded(tok, fitted[1])
    alone.edit(update(2))
    for layer in EDITED:  # and was computed from them: alone, the same update shifts otherwise
        assert not torch.allclose(down(alone, layer) - start[layer], steps[layer], atol=1e-4)


@pytest.mark.parametrize("n_keys, key_size", [(6, 10), (12, 5)], ids=["fewer-keys", "more-keys"])
def test_ridge_shift_is_the_least_squares_solution(n_keys, key_size):
    g = torch.Generator().manual_seed(0)
    keys = torch.randn(n_keys, key_size, generator=g, dtype=torch.float64)
    diffs = torch.randn(n_keys, 4, generator=g, dtype=torch.float64)
    lam = 0.3
    shift = ridge_shift(keys, diffs, torch.tensor(lam, dtype=torch.float64))
    # ridge as plain least squares: rows sqrt(λ)·I below the keys, zeros below the value diffs
    stacked_keys = torch.cat((keys, lam**0.5 * torch.eye(key_size, dtype=torch.float64)))
    stacked_diffs = torch.cat((diffs, torch.zeros(key_size, 4, dtype=torch.float64)))
    direct = torch.linalg.lstsq(stacked_keys, stacked_diffs).solution
    assert torch.allclose(shift, direct, atol=1e-10)


def test_least_squares_reconciles_conflicting_edits_that_summing_does_not():
    """Two edits whose keys nearly coincide ask for orthogonal value changes: one solve gives each
    key its own value difference; the sum of the shifts each edit asks for alone gives both keys
    both differences (the cancellation and interference MALMEN's aggregation removes)."""
    g = torch.Generator().manual_seed(0)
    key = torch.randn(16, generator=g, dtype=torch.float64)
    keys = torch.stack((key, key + 0.3 * torch.randn(16, generator=g, dtype=torch.float64)))
    diffs = torch.eye(2, 8, dtype=torch.float64)
    lam = torch.tensor(1e-6, dtype=torch.float64)
    joint = ridge_shift(keys, diffs, lam)
    summed = ridge_shift(keys[:1], diffs[:1], lam) + ridge_shift(keys[1:], diffs[1:], lam)
    assert (keys @ joint - diffs).abs().max() < 1e-3
    assert (keys @ summed - diffs).abs().max() > 0.5


def test_fit_and_checkpoint_give_identical_edits(fitted, tok):
    editor = fitted[0]
    again = loaded(tok, fitted[1])
    ours, theirs = editor.nets.state_dict(), again.nets.state_dict()
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
    try:
        assert editor.edit(SHOUT_API) == again.edit(SHOUT_API)
        assert all(torch.equal(down(editor, layer), down(again, layer)) for layer in EDITED)
    finally:
        editor.reset()


def test_bf16_models_are_edited_in_their_dtype_and_reset_exactly(fitted, tok):
    editor = loaded(tok, fitted[1], torch.bfloat16)
    before = snapshot(editor.model)
    result = editor.edit(update(4))
    assert result["loss_after"] < result["loss_before"]
    assert changed(editor.model, before) == {DOWN.format(layer) for layer in EDITED}
    assert all(down(editor, layer).dtype == torch.bfloat16 for layer in EDITED)
    editor.reset()
    assert changed(editor.model, before) == set()


def test_meta_batches_hold_one_example_out_and_take_locality_from_other_apis():
    for seed in range(20):
        edit, gen, loc = meta_batch(FIT_UPDATES, 2, random.Random(seed))
        chosen = [u for u in FIT_UPDATES if any(e in u.examples for e in gen)]
        assert len(gen) == len(loc) == len(chosen) == 2
        assert not any(e in u.examples for u in chosen for e in loc)
        for u in chosen:
            mine = [e for e in edit if e in u.examples]
            if len(u.examples) == 1:
                assert mine == list(u.examples) and u.examples[0] in gen
            else:
                assert len(mine) == 1 and mine[0] not in gen


def test_errors_say_what_to_do(fitted, tok):
    editor = MALMENEditor(tiny_llama(tok), tok, MALMENOptions(**TINY))
    with pytest.raises(ValueError, match=r"not trained: call fit\(updates, out\) first.*checkpoint="):
        editor.edit(update(0))
    with pytest.raises(ConfigError, match="more APIs than batch_size=2"):
        editor.fit(FIT_UPDATES[:2], Path("unused"))
    with pytest.raises(ConfigError, match="trained for .* same layers"):
        MALMENEditor(
            tiny_llama(tok), tok, MALMENOptions(**{**TINY, "layers": [2]}, checkpoint=str(fitted[1]))
        )
    with pytest.raises(ConfigError, match="norm_on"):
        MALMENEditor(tiny_llama(tok), tok, MALMENOptions(norm_on="weights", layers=[2]))


def test_the_config_builds_the_editor_with_app_d_settings(tok):
    config = yaml.safe_load(CONFIG.read_text())
    assert set(config) == {"name", "target", "options"} and config["name"] == "malmen"
    options = config["options"]
    app_d = {"layers": None, "module": "mlp.down_proj", "rank": 1920, "n_blocks": 2, "lr": 1e-5}
    assert {key: options[key] for key in app_d} == app_d
    assert (options["batch_size"], options["steps"], options["max_norm"]) == (4, 1000, 1.0)
    with pytest.raises(ConfigError, match=f"last 5 decoder layers by default, but the model has {LAYERS}"):
        load_editor(config["target"], tiny_llama(tok), tok, options)
    editor = load_editor(config["target"], tiny_llama(tok), tok, {**options, "layers": [LAYERS - 1]})
    assert isinstance(editor, MALMENEditor) and editor.name == "malmen" and not editor.fitted
    assert editor.module_names == [f"model.layers.{LAYERS - 1}.mlp.down_proj"]
