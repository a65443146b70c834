"""vLLM on GPUs: `LLM.generate(prompts, SamplingParams(n, temperature, top_p, max_tokens, stop))`.

Each prompt gets its own `SamplingParams` whose `max_tokens` is the cap or what the prompt
leaves of the model's context (`max_model_len`), whichever is smaller. Each sample is a request of
its own (`n=1`) with its own seed (`GenerationRequest.seeds`): vLLM gives a request with a seed a
generator of its own, so what a sample draws does not depend on the batch or on which samples a
resumed run still needs (vLLM promises the same output for the same seed on the same hardware and
version; its batched kernels may still differ in the last bits between batch shapes). The prefix
cache shares the prompt's work between a problem's samples.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

from eval.generation.base import GenerationRequest, SamplingConfig, new_token_budget

log = logging.getLogger(__name__)


class VLLMGenerator:
    name = "vllm"

    def __init__(
        self,
        path: str,
        tensor_parallel_size: int = 1,
        dtype: str = "auto",
        gpu_memory_utilization: float = 0.9,
        max_model_len: int | None = None,
        batch_size: int = 256,
        trust_remote_code: bool = False,
    ):
        try:
            from vllm import LLM
        except ImportError as err:
            raise RuntimeError(
                "backend=vllm needs vllm (pip install 'editforge[gpu]'); on CPU use backend=hf"
            ) from err
        self.llm = LLM(
            model=path,
            tensor_parallel_size=tensor_parallel_size,
            dtype=dtype,
            gpu_memory_utilization=gpu_memory_utilization,
            max_model_len=max_model_len,
            trust_remote_code=trust_remote_code,
        )
        self.tokenizer = self.llm.get_tokenizer()
        # max_model_len as given, or the model's own; newer vLLM also exposes it on LLM itself
        model_config = getattr(self.llm, "model_config", None) or self.llm.llm_engine.model_config
        self.context = model_config.max_model_len
        self.batch_size = batch_size  # prompts per generate call: bounds what a crash can lose

    def generate(
        self, requests: Sequence[GenerationRequest], n: int, sampling: SamplingConfig
    ) -> Iterator[tuple[GenerationRequest, list[str]]]:
        from vllm import SamplingParams

        for start in range(0, len(requests), self.batch_size):
            batch, params = [], []
            for request in requests[start : start + self.batch_size]:
                budget = new_token_budget(
                    sampling.max_new_tokens, len(self.tokenizer.encode(request.prompt)), self.context
                )
                if budget == 0:
                    log.warning(
                        "%s/%s: the prompt fills the model's context; no tokens left to generate",
                        request.problem.id,
                        request.split,
                    )
                    yield request, [""] * n
                    continue
                batch.append(request)
                params.extend(
                    SamplingParams(
                        n=1,
                        temperature=sampling.temperature,
                        top_p=sampling.top_p,
                        max_tokens=budget,
                        stop=list(sampling.stop) or None,
                        seed=seed,
                    )
                    for seed in request.seeds(sampling.seed, n)
                )
            if not batch:
                continue
            prompts = [r.prompt for r in batch for _ in range(n)]
            outputs = self.llm.generate(prompts, params, use_tqdm=True)
            for i, request in enumerate(batch):
                yield request, [output.outputs[0].text for output in outputs[i * n : (i + 1) * n]]

    def close(self) -> None:
        del self.llm
