"""What the model-editor tests share: a tiny random Llama, one torch thread, greedy decoding to
EOS, logits, weight snapshots.

The tiny model's initializer range is 0.2 rather than 0.02 so its logits can move far enough
for a few optimisation steps to make greedy decoding produce a target exactly.
"""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig

LAYERS = 3


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny matrices: one thread is as fast, and does not spin against other jobs on the cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def greedy(model, tok, prompt: str, max_new_tokens: int = 24) -> str | None:
    """The greedy completion up to EOS, or None when it does not stop."""
    inputs = tok(prompt, return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**inputs, do_sample=False, max_new_tokens=max_new_tokens)
    new = out[0, inputs["input_ids"].shape[1] :].tolist()
    if tok.eos_token_id not in new:
        return None
    return tok.decode(new[: new.index(tok.eos_token_id)], clean_up_tokenization_spaces=False)


def logits(model, tok, prompt: str) -> torch.Tensor:
    with torch.no_grad():
        return model(**tok(prompt, return_tensors="pt")).logits


def snapshot(model) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def changed(model, before: dict[str, torch.Tensor]) -> set[str]:
    return {name for name, p in model.named_parameters() if not torch.equal(p, before[name])}


def tiny_llama(tok, seed: int = 0):
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=LAYERS,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=256,
        initializer_range=0.2,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=False,
    )
    return AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
