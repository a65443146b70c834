"""ROME, MEMIT, PMET and AlphaEdit on a tiny Llama that has learnt its APIs' arguments (CPU).

The tiny model's MLP outputs are small next to its residual stream and its statistics come
from a few dozen chunks, so the tests scale what the 7B settings assume: a larger value clamp
and more value steps (ROME, PMET), a smaller λ (MEMIT, PMET: 15,000 outweighs a few tiny keys)
and a smaller L2 (AlphaEdit). Everything else is each editor's default, prefixes included.
"""

from __future__ import annotations

import copy
import os

import pytest
import torch
from editor_checks import changed, greedy, one_thread, snapshot  # noqa: F401 (one_thread: this module's fixture)
from tiny_facts import FACTS, corpus, tokenizer, trained_model, update

from core.editing import APIUpdate, EditExample, load_editor
from core.errors import ConfigError
from train.editors.locate import PREFIX_STARTS, model_prefixes, requests_of, subject_index, subject_request
from train.editors.memit import AlphaEditEditor, MEMITEditor, PMETEditor
from train.editors.moments import Corpus
from train.editors.rome import ROMEEditor, ROMEOptions, rank_one_update

STATS = {"stats_samples": 64, "stats_chunk_tokens": 64}
TINY = {
    "rome": (ROMEEditor, {"layer": 1, "clamp_norm_factor": 20.0, "v_steps": 50}),
    "memit": (MEMITEditor, {"layers": [1, 2], "mom2_update_weight": 10.0}),
    "pmet": (
        PMETEditor,
        {
            "layers": [1, 2],
            "mom2_update_weight": 1.0,
            "clamp_norm_factor": 20.0,
            "v_steps": 50,
            "v_weight_decay": 1e-3,
        },
    ),
    "alphaedit": (AlphaEditEditor, {"layers": [1, 2], "L2": 1e-3, "clamp_norm_factor": 4.0}),
}
DOWN = "model.layers.{}.mlp.down_proj.weight"
UNRELATED = [(p, t) for p, t in corpus() if "math.isqrt" not in p and "os.getcwd" not in p]


@pytest.fixture(scope="module")
def tok():
    return tokenizer()


@pytest.fixture(scope="module")
def base(tok):
    return trained_model(tok, steps=200)


@pytest.fixture(scope="module")
def preserved(tmp_path_factory):
    """AlphaEdit's corpus: three unrelated prompts, one file each (fewer tokens than the MLP is
    wide, so their keys leave a null space to write into)."""
    folder = tmp_path_factory.mktemp("preserved")
    for i, (p, t) in enumerate(UNRELATED[::97][:3]):
        (folder / f"{i}.py").write_text(p + t)
    return folder


@pytest.fixture(scope="module")
def stats_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("moments")


def build(name, model, tok, stats_dir, preserved, **extra):
    cls, options = TINY[name]
    options = {**options, **STATS, "stats_dir": str(stats_dir), **extra}
    if name == "alphaedit":
        options.setdefault("corpus", str(preserved))
    return cls(model, tok, cls.options(**options))


def test_the_tiny_model_knows_its_apis(base, tok):
    assert all(greedy(base, tok, p) == t for p, t in corpus()[::11])


# ------------------------------------------------------------------------------- the subject
def test_the_subject_is_the_apis_last_name_in_the_prompt_else_the_first_in_the_target(tok):
    named = EditExample("# use math.isqrt\nx = math.isqrt", "(4)\n")
    request = subject_request(named, ("math.isqrt", "isqrt"))
    assert request.prompt == named.prompt and request.subject_end == len(named.prompt)
    unnamed = EditExample("## Code After:\n", "y = 1\nx = math.isqrt(4)\n")
    request = subject_request(unnamed, ("math.isqrt", "isqrt"))
    assert request.prompt == "## Code After:\ny = 1\nx = math.isqrt" and request.target == "(4)\n"
    # a longer identifier is not the API; the bare name is the fallback
    bare = subject_request(EditExample("from math import isqrt_fast, isqrt\n", "x"), ("math.isqrt", "isqrt"))
    assert bare.subject == "isqrt" and bare.prompt[: bare.subject_end].endswith(", isqrt")
    with pytest.raises(ValueError, match="no name of the edited API"):
        subject_request(EditExample("x = 1\n", "y = 2\n"), ("math.isqrt",))
    ids = tok(request.prompt)["input_ids"]
    index = subject_index(tok, request.prompt, request.subject_end)
    assert index == len(ids) - 1 and tok.decode(ids[1 : index + 1]).endswith("math.isqrt")
    inside = subject_index(tok, request.prompt, len("## Code After:\ny"))  # a name mid-prompt
    assert tok.decode(ids[1 : inside + 1]) == "## Code After:\ny"


def test_prefixes_are_the_models_own_seeded_and_need_no_pad_token(base):
    tok = tokenizer()
    tok.pad_token = None  # as CodeLlama's tokenizer: nothing to pad with
    groups = model_prefixes(base, tok, [(5, 10), (3, 2)], seed=0)
    assert [len(g) for g in groups] == [1, 10, 2] and groups[0] == [""]
    for start in PREFIX_STARTS:  # the code openings take turns: two texts each
        assert sum(text.startswith(start) for text in groups[1]) == 2, start
    assert all(len(tok(text, add_special_tokens=False)["input_ids"]) >= 5 for text in groups[1])
    assert groups == model_prefixes(base, tok, [(5, 10), (3, 2)], seed=0)
    assert groups != model_prefixes(base, tok, [(5, 10), (3, 2)], seed=1)


def test_an_update_without_names_uses_its_id():
    update = APIUpdate("math.isqrt/R1", "", (EditExample("p\n", "x = math.isqrt(1)\n"),))
    assert update.subject_names() == ("math.isqrt", "isqrt")
    assert requests_of(update)[0].prompt.endswith("math.isqrt")


# --------------------------------------------------------------------------- the must-shows
@pytest.mark.parametrize("name", sorted(TINY))
def test_one_edit_gives_the_target_changes_only_its_layers_and_reset_restores(
    name, base, tok, stats_dir, preserved
):
    model = copy.deepcopy(base)
    before = snapshot(model)
    originals = {p: greedy(model, tok, p) for p, _ in UNRELATED[::8]}
    editor = build(name, model, tok, stats_dir, preserved)
    first = update(0, "({})")
    stats = editor.edit(first)
    assert greedy(editor.model, tok, first.examples[0].prompt) == first.examples[0].target
    layers = [editor.layer] if name == "rome" else editor.layers
    assert changed(model, before) == {DOWN.format(layer) for layer in layers}
    assert stats["max_abs_delta"] > 0 and editor.notice() == ""
    # the stated tolerance: at least 90% of unrelated prompts keep their greedy completion
    kept = sum(greedy(model, tok, p) == out for p, out in originals.items())
    assert kept >= 0.9 * len(originals), f"{kept}/{len(originals)} unrelated completions kept"

    second = update(2, "(...)")
    after_first = {k: v.clone() for k, v in snapshot(model).items() if k in changed(model, before)}
    editor.edit(second)  # successive: written on top of the first
    assert greedy(editor.model, tok, second.examples[0].prompt) == second.examples[0].target
    assert greedy(editor.model, tok, first.examples[0].prompt) == first.examples[0].target
    assert any(not torch.equal(model.get_parameter(k), v) for k, v in after_first.items())

    editor.reset()
    assert changed(model, before) == set()
    assert editor.edit(first)["max_abs_delta"] > 0  # usable again after reset


def test_successive_edits_start_from_the_edited_weights(base, tok, stats_dir, preserved):
    both = copy.deepcopy(base)
    editor = build("memit", both, tok, stats_dir, preserved)
    editor.edit(update(0, "({})"))
    editor.edit(update(2, "(...)"))
    alone = copy.deepcopy(base)
    build("memit", alone, tok, stats_dir, preserved).edit(update(2, "(...)"))
    first_only = copy.deepcopy(base)
    build("memit", first_only, tok, stats_dir, preserved).edit(update(0, "({})"))
    weight = DOWN.format(2)
    # the two edits' sum is not either edit alone
    assert not torch.equal(both.get_parameter(weight), alone.get_parameter(weight))
    assert not torch.equal(both.get_parameter(weight), first_only.get_parameter(weight))


# ---------------------------------------------------------------------------- closed forms
def test_rome_closed_form_is_the_constrained_least_squares_solution(base, tok, stats_dir, preserved):
    model = copy.deepcopy(base)
    w0 = model.get_parameter(DOWN.format(1)).detach().double().clone()
    editor = build("rome", model, tok, stats_dir, preserved, prefixes=[])  # u = k: the textbook case
    editor.edit(update(0, "({})"))
    (step,) = editor.history
    assert torch.equal(step.u, step.k)
    c = editor.moment[1].double()
    k, r = step.k.double(), step.v.double() - w0 @ step.k.double()
    # min_Δ tr(Δ C Δᵀ) s.t. Δ k = r, row by row: [[2C, k], [kᵀ, 0]] [δ; μ] = [0; r]
    d = len(k)
    kkt = torch.zeros(d + 1, d + 1, dtype=torch.float64)
    kkt[:d, :d], kkt[:d, d], kkt[d, :d] = 2 * c, k, k
    rhs = torch.zeros(d + 1, len(r), dtype=torch.float64)
    rhs[d] = r
    direct = torch.linalg.solve(kkt, rhs)[:d].T
    assert torch.allclose(step.delta, direct, rtol=1e-6, atol=1e-9)
    assert torch.allclose((w0 + step.delta) @ k, step.v.double(), rtol=1e-6, atol=1e-8)
    edited = model.get_parameter(DOWN.format(1)).double()
    assert torch.allclose(edited, w0 + direct, atol=1e-6)  # what the weight holds (float32)
    # with prefixes the direction is C⁻¹u and the constraint stays at k (EasyEdit's form)
    u = k + 0.1 * torch.randn(d, dtype=torch.float64)
    delta = rank_one_update(w0, c, u, k, step.v)
    assert torch.allclose((w0 + delta) @ k, step.v.double(), rtol=1e-6, atol=1e-8)


def test_memit_update_solves_its_normal_equations(base, tok, stats_dir, preserved):
    from train.editors.memit import memit_update

    model = copy.deepcopy(base)
    editor = build("memit", model, tok, stats_dir, preserved)
    editor.setup()
    c = editor.moment[1].double()
    torch.manual_seed(0)
    keys, residual = torch.randn(3, c.shape[0]).double(), torch.randn(3, 64).double()
    delta = memit_update(residual, keys, c, 10.0)
    # the gradient of Σ‖Δk_i − r_i‖² + λ tr(Δ C Δᵀ) is zero at Δ
    gradient = (delta @ keys.T - residual.T) @ keys + 10.0 * delta @ c
    assert gradient.abs().max() < 1e-8


def test_alphaedit_update_is_orthogonal_to_the_preserved_keys(base, tok, stats_dir, preserved):
    model = copy.deepcopy(base)
    prompts = [(preserved / f).read_text() for f in sorted(os.listdir(preserved))]
    keys = {}

    def record(layer):
        def hook(module, args, out):
            keys.setdefault(layer, []).append(args[0][0].detach().double())

        return hook

    handles = [
        model.get_submodule(f"model.layers.{i}.mlp.down_proj").register_forward_hook(record(i))
        for i in (1, 2)
    ]
    for text in prompts:
        with torch.no_grad():
            model(**tok(text, return_tensors="pt"))
    for h in handles:
        h.remove()
    logits_before = [model(**tok(t, return_tensors="pt")).logits.detach() for t in prompts]
    before = snapshot(model)
    # the exact null space: the tiny model's smallest non-zero eigenvalues are below the 7B threshold
    editor = build("alphaedit", model, tok, stats_dir, preserved, nullspace_threshold=1e-8)
    editor.edit(update(0, "({})"))
    assert greedy(model, tok, update(0, "({})").examples[0].prompt) == "({})\n"
    for layer in (1, 2):
        k0 = torch.cat(keys[layer])  # every token of every preserved text
        assert k0.shape[0] < k0.shape[1]  # fewer keys than dimensions: a real null space
        delta = model.get_parameter(DOWN.format(layer)).double() - before[DOWN.format(layer)].double()
        assert delta.norm() > 1e-3
        assert (delta @ k0.T).norm() <= 1e-5 * delta.norm() * k0.norm()
    for text, logits in zip(prompts, logits_before, strict=True):
        after = model(**tok(text, return_tensors="pt")).logits.detach()
        # what is left is float32 rounding (weights, keys) against an update of norm ~6
        assert (after - logits).abs().max() < 1e-3 * logits.abs().max()


# -------------------------------------------------------------------------- the moment cache
def test_the_second_moment_is_computed_once_and_read_back(base, tok, tmp_path, preserved):
    first_model = copy.deepcopy(base)
    first = build("rome", first_model, tok, tmp_path, preserved)
    first.edit(update(0, "({})"))
    name = "model.layers.1.mlp.down_proj"
    assert first.moments.computed == [name]
    (cached,) = list(tmp_path.iterdir())
    stamp = cached.stat().st_mtime_ns

    second_model = copy.deepcopy(base)
    second = build("rome", second_model, tok, tmp_path, preserved)
    second.edit(update(0, "({})"))
    assert second.moments.computed == [] and cached.stat().st_mtime_ns == stamp
    assert torch.equal(first.history[0].delta, second.history[0].delta)  # the same update
    assert torch.equal(first.moment[1], second.moment[1])

    other = copy.deepcopy(base)
    with torch.no_grad():
        other.get_parameter("model.layers.0.mlp.up_proj.weight").mul_(1.5)
    assert build("rome", other, tok, tmp_path, preserved).moments.path(name) != cached


def test_a_corpus_folder_is_read_as_text_and_bad_options_are_config_errors(base, tok, tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "blob.bin").write_bytes(b"\xff\xfe\x00\x81")
    (tmp_path / "notes.md").write_text("  \n")
    assert list(Corpus(str(tmp_path)).texts()) == ["x = 1\n"]
    with pytest.raises(ConfigError, match="corpus='/no/such/folder'"):
        ROMEEditor(copy.deepcopy(base), tok, ROMEOptions(layer=1, corpus="/no/such/folder"))
    with pytest.raises(ConfigError, match="4 decoder layers"):
        MEMITEditor(copy.deepcopy(base), tok)  # the study's layers 4-8 do not exist here
    with pytest.raises(ValueError, match="no name of the edited API"):
        build("memit", copy.deepcopy(base), tok, tmp_path, tmp_path).edit(
            APIUpdate("a.b/R1", "", (EditExample(FACTS[0][1], "x\n"),))
        )


def test_load_editor_passes_the_options(base, tok, tmp_path):
    editor = load_editor(
        "train.editors.memit:PMETEditor",
        copy.deepcopy(base),
        tok,
        {"layers": [1, 2], "stats_dir": str(tmp_path)},
    )
    assert isinstance(editor, PMETEditor) and editor.values.steps == 20 and editor.values.weight_decay == 0.5
