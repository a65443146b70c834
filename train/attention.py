"""Attention for packed, padding-free rows, and the choice of kernel behind `recipe.attn_implementation`.

trl's padding-free collator flattens a micro-batch into one row whose position ids restart at every
document, and computes the documents' boundaries once per batch, on the CPU: `cu_seq_lens_q/k`
(cumulative lengths, int32) and `max_length_q/k` (the longest document). transformers hands those
keyword arguments unchanged to the attention function of every decoder layer. `packed_varlen_attention`
is registered under `PACKED_VARLEN` through transformers' `AttentionInterface`, and FA2's mask function
under the same name through `AttentionMaskInterface`: it returns None for a row without padding, so no
4D mask is built. The kernel computes causal attention within each document:

- on CUDA in bf16/fp16, PyTorch's FlashAttention varlen kernel (`torch.nn.attention.varlen`): each
  document's causal triangle only, grouped-query attention as is;
- elsewhere, an exact per-document reference (SDPA on each document alone), so the same path runs,
  and is tested, on CPU.

>>> choose_attention(AttnImpl.auto, packing=True, dtype=DType.bf16, env=AttentionEnv(cuda=True))
'packed_varlen'
>>> choose_attention(AttnImpl.auto, packing=True, dtype=DType.fp32, env=AttentionEnv(cuda=False))
'sdpa'
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, flash_attention_mask

from core.errors import ConfigError
from train.config import AttnImpl, DType

PACKED_VARLEN = "packed_varlen"
HALF = (torch.bfloat16, torch.float16)

try:
    from torch.nn.attention.varlen import varlen_attn
except ImportError:  # torch < 2.9
    varlen_attn = None
# From torch 2.12 the public wrapper takes a scale, a causal window and fewer KV heads.
_PUBLIC_VARLEN = varlen_attn is not None and "enable_gqa" in inspect.signature(varlen_attn).parameters


# ---------------------------------------------------------------------------- the kernel
def packed_varlen_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    cu_seq_lens_q: torch.Tensor | None = None,
    cu_seq_lens_k: torch.Tensor | None = None,
    max_length_q: int | None = None,
    max_length_k: int | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Causal attention within each document of padding-free rows (transformers' attention contract).

    query: (batch, heads, tokens, head_dim); key, value: (batch, kv_heads, tokens, head_dim).
    Returns (batch, tokens, heads, head_dim) and no attention weights.
    """
    if attention_mask is not None:
        raise ValueError(
            f"{PACKED_VARLEN} attention takes padding-free rows and got a padding mask: collate with "
            "padding_free=True (recipe.packing=true), or load the model with attn_implementation=sdpa"
        )
    if key.shape[2] != query.shape[2]:
        raise ValueError(
            f"{PACKED_VARLEN} attention trains without a KV cache; load the model with sdpa to generate"
        )
    if dropout:
        raise ValueError(f"{PACKED_VARLEN} attention has no dropout; set the model's attention_dropout to 0")
    batch, heads, tokens, head_dim = query.shape
    if cu_seq_lens_q is None:
        # A forward without the collator's boundaries (a direct call): derived here, in every layer.
        cu, longest = boundaries_from_positions(kwargs.get("position_ids"), batch, tokens)
        cu_seq_lens_q = cu_seq_lens_k = cu.to(query.device)
        max_length_q = max_length_k = longest
    q, k, v = (x.transpose(1, 2).reshape(batch * tokens, x.shape[1], head_dim) for x in (query, key, value))
    if q.is_cuda and q.dtype in HALF:
        out = _flash_varlen(q, k, v, cu_seq_lens_q, cu_seq_lens_k, max_length_q, max_length_k, scaling)
    else:
        out = reference_varlen_attention(q, k, v, cu_seq_lens_q, scaling)
    return out.view(batch, tokens, heads, head_dim), None


def reference_varlen_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seq_lens: torch.Tensor, scale: float | None
) -> torch.Tensor:
    """Exact causal attention of each document alone: (tokens, heads, head_dim) in and out; fewer KV
    heads (GQA) are repeated to the query heads. Reads the boundaries on the host: a CPU path."""
    groups = q.shape[1] // k.shape[1]
    bounds = cu_seq_lens.tolist()
    docs = []
    for start, end in zip(bounds[:-1], bounds[1:], strict=True):
        qd, kd, vd = (x[start:end].transpose(0, 1) for x in (q, k, v))
        kd, vd = kd.repeat_interleave(groups, dim=0), vd.repeat_interleave(groups, dim=0)
        docs.append(F.scaled_dot_product_attention(qd, kd, vd, is_causal=True, scale=scale).transpose(0, 1))
    return torch.cat(docs)


def _flash_varlen(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_q: torch.Tensor,
    cu_k: torch.Tensor,
    max_q: int,
    max_k: int,
    scale: float | None,
) -> torch.Tensor:
    if _PUBLIC_VARLEN:
        return varlen_attn(
            q,
            k,
            v,
            cu_q,
            cu_k,
            max_q,
            max_k,
            scale=scale,
            window_size=(-1, 0),
            enable_gqa=q.shape[1] != k.shape[1],
        )
    # Older torch: the aten op behind varlen_attn (it has a backward and takes fewer KV heads as they are).
    return torch.ops.aten._flash_attention_forward(
        q, k, v, cu_q, cu_k, max_q, max_k, 0.0, True, False, scale=scale
    )[0]


def boundaries_from_positions(
    position_ids: torch.Tensor | None, batch: int, tokens: int
) -> tuple[torch.Tensor, int]:
    """(cu_seq_lens, max_length) of rows flattened into one: a document starts wherever the position is 0
    (every row starts one); without position ids, each row is one document."""
    if position_ids is None:
        cu = torch.arange(0, (batch + 1) * tokens, tokens, dtype=torch.int32)
        return cu, tokens
    flat = position_ids.expand(batch, tokens).reshape(-1)
    starts = torch.nonzero(flat == 0).reshape(-1)
    cu = torch.cat([starts, starts.new_tensor([flat.numel()])]).to(torch.int32)
    return cu, int((cu[1:] - cu[:-1]).max())


AttentionInterface.register(PACKED_VARLEN, packed_varlen_attention)
AttentionMaskInterface.register(PACKED_VARLEN, flash_attention_mask)


# ---------------------------------------------------------------------------- the choice
@dataclass(frozen=True)
class AttentionEnv:
    """What this machine offers: CUDA, the flash-attn packages (FA3 kernels are built for Hopper)."""

    cuda: bool
    flash_attn_2: bool = False
    flash_attn_3: bool = False
    hopper: bool = False


def attention_env() -> AttentionEnv:
    from transformers.utils import is_flash_attn_2_available, is_flash_attn_3_available

    cuda = torch.cuda.is_available()
    return AttentionEnv(
        cuda=cuda,
        flash_attn_2=is_flash_attn_2_available(),
        flash_attn_3=is_flash_attn_3_available(),
        hopper=cuda and torch.cuda.get_device_capability()[0] == 9,
    )


def choose_attention(requested: AttnImpl, packing: bool, dtype: DType, env: AttentionEnv) -> str:
    """The attention implementation a model is loaded with, or a ConfigError that names the fix.

    `auto` takes the fastest exact kernel there is: FlashAttention 3 (Hopper) or 2 when installed,
    else PyTorch's varlen kernel for packed rows on CUDA, else SDPA (CPU, fp32, padded batches)."""
    half = dtype in (DType.bf16, DType.fp16)
    if requested == AttnImpl.auto:
        if env.cuda and half:
            if env.flash_attn_3 and env.hopper:
                return AttnImpl.flash_attention_3.value
            if env.flash_attn_2:
                return AttnImpl.flash_attention_2.value
            if packing:
                return PACKED_VARLEN
        return AttnImpl.sdpa.value
    flash = {
        AttnImpl.flash_attention_2: ("flash-attn package (pip install 'editforge[gpu]')", env.flash_attn_2),
        AttnImpl.flash_attention_3: (
            "flash-attn 3 package (flash_attn_interface, from flash-attn's hopper/)",
            env.flash_attn_3,
        ),
    }
    if requested in flash:
        package, installed = flash[requested]
        if not (env.cuda and installed):
            missing = "CUDA" if not env.cuda else f"the {package}"
            raise ConfigError(
                f"recipe.attn_implementation={requested.value} needs {missing}; leave it at auto "
                "(PyTorch's varlen kernel on CUDA) or set recipe.attn_implementation=sdpa"
            )
    if requested == AttnImpl.varlen:
        if env.cuda and not half:
            raise ConfigError(
                f"recipe.attn_implementation=varlen runs PyTorch's flash kernel on CUDA, which takes bf16 or "
                f"fp16, not recipe.dtype={dtype.value}: set recipe.dtype=bf16 or attn_implementation=sdpa"
            )
        return PACKED_VARLEN
    return requested.value


def resolve_attn_implementation(requested: AttnImpl, packing: bool, dtype: DType) -> str:
    """`choose_attention` on this machine."""
    return choose_attention(requested, packing, dtype, attention_env())
