"""Model and tokenizer loading: hub or local checkpoints, or a tiny Llama built from a config.

The tiny path trains a byte-level BPE tokenizer on the training texts on the fly, so the
whole training stack runs on CPU without downloading anything. Its pad token is its EOS
token on purpose: that is the case where careless label masking stops a model learning to
stop, and the tests cover it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, PreTrainedTokenizerFast
from transformers.modeling_layers import GradientCheckpointingLayer

import train.attention  # noqa: F401  (registers the packed varlen kernel a model may be loaded with)
from core.dtypes import torch_dtype
from core.errors import ConfigError
from train.config import DType, QuantizationConfig, RecipeConfig, TinyModelConfig

TINY_SPECIAL = {"bos_token": "<|begin|>", "eos_token": "<|end|>", "unk_token": "<|unk|>"}


# deepseek-ai/deepseek-coder-1.3b-base's config.json (its linear rope scaling changes no cost).
DEEPSEEK_CODER_1_3B = dict(
    vocab_size=32256,
    hidden_size=2048,
    intermediate_size=5504,
    num_hidden_layers=24,
    num_attention_heads=16,
    num_key_value_heads=16,
    max_position_embeddings=16384,
    rope_theta=100000.0,
    rms_norm_eps=1e-6,
    tie_word_embeddings=False,
)


def check_dtype(dtype: DType) -> None:
    if dtype == DType.fp16 and not torch.cuda.is_available():
        raise ConfigError("recipe.dtype=fp16 needs a GPU; use recipe.dtype=fp32 or bf16 on CPU")


def train_tiny_tokenizer(texts: Iterable[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained on `texts` (deterministic for the same texts)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(TINY_SPECIAL.values()),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    bos = TINY_SPECIAL["bos_token"]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", special_tokens=[(bos, tok.token_to_id(bos))]
    )
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, **TINY_SPECIAL)
    fast.pad_token = fast.eos_token
    return fast


def load_or_train_tokenizer(recipe: RecipeConfig, texts: Iterable[str] | None, cache_dir: Path) -> Any:
    """The recipe's tokenizer; for a tiny model, train one (cached in `cache_dir`)."""
    if recipe.model.tiny is None:
        tok = AutoTokenizer.from_pretrained(
            recipe.model.path,
            revision=recipe.model.revision,
            trust_remote_code=recipe.model.trust_remote_code,
        )
    elif (cache_dir / "tokenizer.json").exists():
        tok = AutoTokenizer.from_pretrained(str(cache_dir))
    else:
        if texts is None:
            raise ValueError("a tiny model's tokenizer needs training texts")
        tok = train_tiny_tokenizer(texts, recipe.model.tiny.vocab_size)
        tok.save_pretrained(str(cache_dir))
    if tok.eos_token_id is None:
        raise ConfigError(f"the tokenizer of {recipe.model.path} has no EOS token; completions could not end")
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return tok


def tiny_llama_config(tiny: TinyModelConfig, tokenizer: Any) -> LlamaConfig:
    return LlamaConfig(
        vocab_size=max(len(tokenizer), tiny.embedding_size or 0),
        hidden_size=tiny.hidden_size,
        intermediate_size=tiny.intermediate_size,
        num_hidden_layers=tiny.num_hidden_layers,
        num_attention_heads=tiny.num_attention_heads,
        num_key_value_heads=tiny.num_key_value_heads,
        max_position_embeddings=tiny.max_position_embeddings,
        rope_theta=tiny.rope_theta,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
    )


def load_model(recipe: RecipeConfig, tokenizer: Any, attn_implementation: str) -> torch.nn.Module:
    """The causal LM to fine-tune, with the KV cache off (a cache disables packed-row masking)."""
    dtype = torch_dtype(recipe.dtype)
    if recipe.model.tiny is not None:
        config = tiny_llama_config(recipe.model.tiny, tokenizer)
        model = AutoModelForCausalLM.from_config(config, attn_implementation=attn_implementation, dtype=dtype)
    else:
        model = AutoModelForCausalLM.from_pretrained(
            recipe.model.path,
            revision=recipe.model.revision,
            trust_remote_code=recipe.model.trust_remote_code,
            attn_implementation=attn_implementation,
            dtype=dtype,
            **_quantized_loading(recipe.quantization),
        )
    if recipe.quantization is not None:
        from peft import prepare_model_for_kbit_training

        # Freezes the base, keeps norms and embeddings in fp32 for stable training, and lets
        # checkpointed layers pass gradients to the adapters.
        model = prepare_model_for_kbit_training(
            model, use_gradient_checkpointing=recipe.gradient_checkpointing
        )
    # transformers only derives the block-diagonal packed mask when no cache is passed.
    model.config.use_cache = False
    if len(tokenizer) > model.get_input_embeddings().weight.shape[0]:
        model.resize_token_embeddings(len(tokenizer))
    return model


def quantization_config(quantization: QuantizationConfig) -> Any:
    """The `BitsAndBytesConfig` of a `recipe.quantization` block (4-bit weights; the head stays 16-bit)."""
    from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type=quantization.quant_type.value,
        bnb_4bit_use_double_quant=quantization.double_quant,
        bnb_4bit_compute_dtype=torch_dtype(quantization.compute_dtype),
    )


def _quantized_loading(quantization: QuantizationConfig | None) -> dict[str, Any]:
    if quantization is None:
        return {}
    # A 4-bit model cannot move after loading: quantise straight onto this rank's GPU (CPU without one).
    device_map = {"": torch.cuda.current_device()} if torch.cuda.is_available() else None
    return {"quantization_config": quantization_config(quantization), "device_map": device_map}


def compile_decoder_layers(model: torch.nn.Module, backend: str = "inductor") -> int:
    """torch.compile each decoder layer in place, where nearly all of a step's time goes; the mask set-up,
    the fused loss head and the optimizer stay eager. Returns how many layers were compiled."""
    layers = [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]
    if not layers:
        raise ConfigError(
            f"recipe.compile_layers=true: {type(model).__name__} has no transformers decoder layers "
            "(GradientCheckpointingLayer) to compile; set recipe.compile_layers=false"
        )
    for layer in layers:
        layer.compile(backend=backend)
    return len(layers)


def count_parameters(model: torch.nn.Module) -> tuple[int, int]:
    """(all, trainable) parameter counts; works on ZeRO-3 partitioned parameters too."""
    total = trainable = 0
    for p in model.parameters():
        n = getattr(p, "ds_numel", None) or p.numel()
        total += n
        trainable += n if p.requires_grad else 0
    return total, trainable
