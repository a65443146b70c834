"""What the model-editor tests share: one torch thread, greedy decoding to EOS, logits, snapshots."""

from __future__ import annotations

import pytest
import torch


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
