"""Packed rows through the varlen attention path (its per-document reference on CPU): the loss and
gradients of each document alone, with and without grouped-query attention; what `auto` picks on
each kind of machine; the errors that name a fix."""

from __future__ import annotations

import copy

import pytest
import torch
from test_packing import encoded  # noqa: F401  (a fixture)
from transformers import AutoModelForCausalLM
from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

from core.errors import ConfigError
from train.attention import PACKED_VARLEN, AttentionEnv, choose_attention
from train.config import AttnImpl, DType, TinyModelConfig
from train.modeling import tiny_llama_config
from train.packing import pack


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny matrices: one thread is as fast, and does not spin against other jobs on the cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _models(tokenizer, kv_heads: int):
    """The same random tiny Llama twice: through the packed varlen path, and through SDPA."""
    torch.manual_seed(0)
    tiny = TinyModelConfig(num_key_value_heads=kv_heads, max_position_embeddings=2048)
    varlen = AutoModelForCausalLM.from_config(
        tiny_llama_config(tiny, tokenizer), attn_implementation=PACKED_VARLEN, dtype=torch.float32
    )
    sdpa = copy.deepcopy(varlen)
    sdpa.set_attn_implementation("sdpa")
    return varlen, sdpa


def _packed_batch(encoded, tokenizer):  # noqa: F811
    packed = pack(encoded, max_length=2048)
    assert len(packed) == 1 and len(packed[0]["seq_lengths"]) == len(encoded) > 1
    collate = DataCollatorForLanguageModeling(pad_token_id=tokenizer.pad_token_id, padding_free=True)
    return collate([packed[0]]), packed[0]["seq_lengths"]


def _targets(labels: torch.Tensor) -> int:
    return int((labels[:, 1:] != -100).sum())


@pytest.mark.parametrize("kv_heads", [2, 4], ids=["gqa", "mha"])
def test_a_packed_row_has_the_loss_and_gradients_of_its_documents_alone(encoded, tiny_tokenizer, kv_heads):  # noqa: F811
    varlen, sdpa = _models(tiny_tokenizer, kv_heads)
    batch, lengths = _packed_batch(encoded, tiny_tokenizer)
    assert "attention_mask" not in batch and batch["cu_seq_lens_q"].tolist()[-1] == sum(lengths)

    packed_loss = varlen(**batch).loss * _targets(batch["labels"])  # summed over every target token
    packed_loss.backward()
    alone_loss, start = 0.0, 0
    for n in lengths:
        ids, labels = batch["input_ids"][:, start : start + n], batch["labels"][:, start : start + n]
        doc_loss = sdpa(input_ids=ids, labels=labels).loss * _targets(labels)
        doc_loss.backward()
        alone_loss, start = alone_loss + doc_loss.detach(), start + n

    torch.testing.assert_close(packed_loss.detach(), alone_loss, rtol=1e-5, atol=1e-4)
    grads = dict(sdpa.named_parameters())
    for name, p in varlen.named_parameters():
        torch.testing.assert_close(p.grad, grads[name].grad, rtol=1e-4, atol=1e-5, msg=name)


def test_without_the_collators_boundaries_the_kernel_takes_them_from_the_positions(encoded, tiny_tokenizer):  # noqa: F811
    varlen, sdpa = _models(tiny_tokenizer, kv_heads=2)
    batch, lengths = _packed_batch(encoded, tiny_tokenizer)
    with torch.no_grad():
        direct = varlen(input_ids=batch["input_ids"], position_ids=batch["position_ids"]).logits[0]
        first = sdpa(input_ids=batch["input_ids"][:, : lengths[0]]).logits[0]
        last = sdpa(input_ids=batch["input_ids"][:, -lengths[-1] :]).logits[0]
        leaky = varlen(input_ids=batch["input_ids"]).logits[0]  # one document: positions never restart
    torch.testing.assert_close(direct[: lengths[0]], first, rtol=1e-4, atol=2e-5)
    torch.testing.assert_close(direct[-lengths[-1] :], last, rtol=1e-4, atol=2e-5)
    assert not torch.allclose(leaky[-lengths[-1] :], last, atol=1e-3)  # the control: documents see each other


def test_a_padding_mask_is_refused_rather_than_ignored(tiny_tokenizer):
    varlen, _ = _models(tiny_tokenizer, kv_heads=2)
    ids = torch.tensor([[5, 6, 7, 8], [5, 6, 0, 0]])
    with pytest.raises(ValueError, match="padding-free"):
        varlen(input_ids=ids, attention_mask=(ids != 0).long())


GPU = AttentionEnv(cuda=True)
FA2 = AttentionEnv(cuda=True, flash_attn_2=True)
FA3_HOPPER = AttentionEnv(cuda=True, flash_attn_2=True, flash_attn_3=True, hopper=True)
FA3_AMPERE = AttentionEnv(cuda=True, flash_attn_2=True, flash_attn_3=True, hopper=False)
CPU = AttentionEnv(cuda=False)


@pytest.mark.parametrize(
    "env, packing, dtype, chosen",
    [
        (FA3_HOPPER, True, DType.bf16, "flash_attention_3"),
        (FA3_AMPERE, True, DType.bf16, "flash_attention_2"),
        (FA2, False, DType.bf16, "flash_attention_2"),  # FA2 unpads padded batches itself
        (GPU, True, DType.bf16, PACKED_VARLEN),  # no flash-attn: PyTorch's own varlen kernel
        (GPU, True, DType.fp16, PACKED_VARLEN),
        (GPU, False, DType.bf16, "sdpa"),  # padded batches carry a mask
        (GPU, True, DType.fp32, "sdpa"),  # flash kernels take 16-bit inputs
        (CPU, True, DType.fp32, "sdpa"),
        (CPU, True, DType.bf16, "sdpa"),
    ],
)
def test_auto_picks_the_fastest_exact_kernel_the_machine_has(env, packing, dtype, chosen):
    assert choose_attention(AttnImpl.auto, packing, dtype, env) == chosen


def test_explicit_choices_run_where_they_can_and_name_the_fix_where_they_cannot():
    assert choose_attention(AttnImpl.varlen, True, DType.fp32, CPU) == PACKED_VARLEN  # the reference
    assert choose_attention(AttnImpl.varlen, True, DType.bf16, GPU) == PACKED_VARLEN
    assert choose_attention(AttnImpl.sdpa, True, DType.bf16, FA2) == "sdpa"
    assert choose_attention(AttnImpl.flash_attention_2, True, DType.bf16, FA2) == "flash_attention_2"
    with pytest.raises(ConfigError, match="flash_attention_2 needs CUDA"):
        choose_attention(AttnImpl.flash_attention_2, True, DType.bf16, CPU)
    with pytest.raises(ConfigError, match="needs the flash-attn package"):
        choose_attention(AttnImpl.flash_attention_2, True, DType.bf16, GPU)
    with pytest.raises(ConfigError, match="flash-attn 3"):
        choose_attention(AttnImpl.flash_attention_3, True, DType.bf16, FA2)
    with pytest.raises(ConfigError, match="recipe.dtype=bf16"):
        choose_attention(AttnImpl.varlen, True, DType.fp32, GPU)
