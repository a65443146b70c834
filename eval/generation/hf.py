"""transformers `generate`: the CPU fallback and the reference implementation of sampling."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, LogitsProcessor, LogitsProcessorList

from core.dtypes import torch_dtype
from core.errors import UserError
from eval.generation.base import GenerationRequest, SamplingConfig, new_token_budget

log = logging.getLogger(__name__)
# Config keys under which architectures give their maximum positions (Llama, GPT-2, others).
CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")


def model_context(config) -> int | None:
    """The most positions the model takes (prompt + new tokens), or None when its config says not."""
    for key in CONTEXT_KEYS:
        value = getattr(config, key, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def load_model(path: str, dtype: str = "auto", trust_remote_code: bool = False, device: str | None = None):
    """(model, tokenizer) of a hub id or folder, on the GPU when there is one: the one loader of
    evaluation (the hf backend, and the editing study, which edits the model it generates with)."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
        model = AutoModelForCausalLM.from_pretrained(
            path, dtype=torch_dtype(dtype), trust_remote_code=trust_remote_code
        )
    except (OSError, ValueError) as err:  # a folder or hub id transformers cannot read as a model
        first = next((line.strip() for line in str(err).splitlines() if line.strip()), type(err).__name__)
        raise UserError(f"model.path={path!r}: transformers cannot load it as a causal LM: {first}") from err
    return model.to(device), tokenizer


class SeededSampling(LogitsProcessor):
    """Temperature and nucleus (top-p) sampling whose every draw comes from its own row's generator.

    transformers samples all rows from the global generator, so what a row draws depends on which
    other rows share its batch, and a resumed run (fewer rows) or another batch size gives other
    completions. Here each row (one sample) has a generator seeded from that sample alone
    (`GenerationRequest.seeds`): the processor adds Gumbel noise from it to the row's tempered,
    top-p-filtered scores, and greedy decoding's argmax then picks exactly a draw from the
    filtered softmax (the Gumbel-max trick). One draw of the vocabulary's size per row per step,
    whatever the other rows do.
    """

    def __init__(self, seeds: Sequence[int], temperature: float, top_p: float, device) -> None:
        self.temperature, self.top_p = temperature, top_p
        self.generators = [torch.Generator(device=device).manual_seed(seed) for seed in seeds]

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if scores.shape[0] != len(self.generators):
            raise ValueError(f"{scores.shape[0]} rows for {len(self.generators)} seeds")
        scores = scores.float() / self.temperature
        if self.top_p < 1.0:  # as transformers' TopPLogitsWarper: keep the smallest set reaching top_p
            ordered, order = torch.sort(scores, descending=False)
            remove = ordered.softmax(dim=-1).cumsum(dim=-1) <= (1 - self.top_p)
            remove[..., -1:] = False
            scores = scores.masked_fill(remove.scatter(1, order, remove), -float("inf"))
        uniform = torch.stack(
            [torch.rand(scores.shape[1], generator=g, device=scores.device) for g in self.generators]
        )
        gumbel = -torch.log(-torch.log(uniform.clamp(min=torch.finfo(uniform.dtype).tiny)))
        return scores + gumbel


class HFGenerator:
    name = "hf"

    def __init__(
        self,
        path: str,
        batch_size: int = 4,
        dtype: str = "auto",
        device: str | None = None,
        trust_remote_code: bool = False,
    ):
        model, tokenizer = load_model(path, dtype, trust_remote_code, device)
        self._attach(model, tokenizer, batch_size)

    @classmethod
    def from_model(cls, model, tokenizer, batch_size: int = 4) -> HFGenerator:
        """A generator over a model already in memory (an edited one: it is used as it is, not copied)."""
        generator = cls.__new__(cls)
        generator._attach(model, tokenizer, batch_size)
        return generator

    def _attach(self, model, tokenizer, batch_size: int) -> None:
        self.tokenizer = tokenizer
        self.tokenizer.padding_side = (
            "left"  # decoder-only: pad on the left so every prompt ends at the same column
        )
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model = model.eval()
        self.device = next(model.parameters()).device
        self.model.generation_config.pad_token_id = self.tokenizer.pad_token_id
        self.context = model_context(self.model.config)
        self.batch_size = batch_size

    def generate(
        self, requests: Sequence[GenerationRequest], n: int, sampling: SamplingConfig
    ) -> Iterator[tuple[GenerationRequest, list[str]]]:
        lengths = {id(r): len(self.tokenizer(r.prompt)["input_ids"]) for r in requests}
        budgets = {
            id(r): new_token_budget(sampling.max_new_tokens, lengths[id(r)], self.context) for r in requests
        }
        for request in requests:
            if budgets[id(request)] == 0:
                log.warning(
                    "%s/%s: the prompt fills the model's context; no tokens left to generate",
                    request.problem.id,
                    request.split,
                )
                yield request, [""] * n
        sample = sampling.temperature > 0
        per = n if sample else 1  # greedy gives one answer: repeated below
        # Similar lengths share a batch: left padding makes the batch as long as its longest prompt.
        todo = sorted((r for r in requests if budgets[id(r)] > 0), key=lambda r: lengths[id(r)])
        for start in range(0, len(todo), self.batch_size):
            batch = todo[start : start + self.batch_size]
            prompts = [r.prompt for r in batch for _ in range(per)]  # row b * per + i: sample i of request b
            inputs = self.tokenizer(prompts, return_tensors="pt", padding=True).to(self.device)
            processors = LogitsProcessorList()
            if sample:
                seeds = [seed for r in batch for seed in r.seeds(sampling.seed, n)]
                processors.append(SeededSampling(seeds, sampling.temperature, sampling.top_p, self.device))
            with torch.no_grad():
                out = self.model.generate(
                    **inputs,
                    do_sample=False,  # SeededSampling draws each row's token: the argmax of its noisy scores
                    temperature=None,  # the model's own sampling settings would only warn: ours are above
                    top_p=None,
                    top_k=None,
                    logits_processor=processors,
                    max_new_tokens=min(budgets[id(r)] for r in batch),
                    use_cache=True,  # models trained here save use_cache=False; generation wants the cache
                    stop_strings=list(sampling.stop) or None,
                    tokenizer=self.tokenizer,
                )
            new_tokens = out[:, inputs["input_ids"].shape[1] :]
            texts = self.tokenizer.batch_decode(new_tokens, skip_special_tokens=True)
            for i, request in enumerate(batch):
                yield request, texts[i * per : (i + 1) * per] * (1 if sample else n)

    def close(self) -> None:
        del self.model
