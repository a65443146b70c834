"""OpenAI-compatible HTTP servers (OpenAI, vLLM's server, TGI, llama.cpp, ...).

Chat models go to `/chat/completions` with the PythonEditGPT messages, base models to
`/completions` with the text prompt. Requests run concurrently up to `concurrency`; a
connection error, a timeout, 429 or 5xx is retried with exponential backoff, and after
`max_retries` the run stops with an error that names the endpoint (samples already
written stay in samples.jsonl, so a rerun continues).

A request asks for all the samples a problem still needs at once (`n`: the prompt is paid once) and
takes one `seed`, the seed of its first sample (`GenerationRequest.seeds`): a run resumed in the
middle of a problem's samples asks for the rest under another seed, so it never draws again what
it already has. What a seed buys depends on the server: OpenAI documents it as best effort (the
same `system_fingerprint` is needed too); vLLM's server gives a seeded request a generator of its
own; servers that ignore `seed` sample afresh. Only the hf and vllm backends give a resumed run
the very completions of an uninterrupted one.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

from core.openai_client import EndpointConfig, EndpointError, OpenAIClient
from eval.generation.base import GenerationRequest, SamplingConfig

__all__ = ["EndpointError", "OpenAIGenerator"]


class OpenAIGenerator:
    name = "openai"

    def __init__(self, model: str, endpoint: EndpointConfig, chat: bool = True, concurrency: int = 8) -> None:
        self.model, self.chat, self.concurrency = model, chat, concurrency
        self.client = OpenAIClient(endpoint)

    def _complete(self, request: GenerationRequest, n: int, sampling: SamplingConfig) -> list[str]:
        body: dict[str, Any] = {
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "max_tokens": sampling.max_new_tokens,
            "seed": request.seeds(sampling.seed, 1)[0],
        }
        if sampling.stop:
            body["stop"] = list(sampling.stop)[:4]  # the API takes at most four
        if self.chat:
            messages = [{"role": role, "content": content} for role, content in request.messages]
            return self.client.chat(self.model, messages, n, **body)
        return self.client.complete(self.model, request.prompt, n, **body)

    def generate(
        self, requests: Sequence[GenerationRequest], n: int, sampling: SamplingConfig
    ) -> Iterator[tuple[GenerationRequest, list[str]]]:
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            futures = {pool.submit(self._complete, r, n, sampling): r for r in requests}
            try:
                for future in as_completed(futures):
                    yield futures[future], future.result()
            finally:
                for future in futures:
                    future.cancel()

    def close(self) -> None:
        return None
