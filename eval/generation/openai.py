"""OpenAI-compatible HTTP servers (OpenAI, vLLM's server, TGI, llama.cpp, ...).

Chat models go to `/chat/completions` with the PythonEditGPT messages, base models to
`/completions` with the text prompt. Requests run concurrently up to `concurrency`; a
connection error, a timeout, 429 or 5xx is retried with exponential backoff, and after
`max_retries` the run stops with an error that names the endpoint (samples already
written stay in samples.jsonl, so a rerun continues).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed

from core.openai_client import EndpointError, OpenAIClient
from eval.generation.base import GenerationRequest, SamplingConfig

__all__ = ["EndpointError", "OpenAIGenerator"]


class OpenAIGenerator:
    name = "openai"

    def __init__(
        self,
        model: str,
        base_url: str = "https://api.openai.com/v1",
        chat: bool = True,
        api_key_env: str = "OPENAI_API_KEY",
        concurrency: int = 8,
        max_retries: int = 6,
        backoff_s: float = 1.0,
        timeout_s: float = 120.0,
    ):
        self.model, self.base_url, self.chat = model, base_url.rstrip("/"), chat
        self.client = OpenAIClient(base_url, api_key_env, max_retries, backoff_s, timeout_s)
        self.concurrency = concurrency

    def _complete(self, request: GenerationRequest, n: int, sampling: SamplingConfig) -> list[str]:
        body = {
            "model": self.model,
            "n": n,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "max_tokens": sampling.max_new_tokens,
            "seed": sampling.seed,
        }
        if sampling.stop:
            body["stop"] = list(sampling.stop)[:4]  # the API takes at most four
        texts: list[str] = []
        while len(texts) < n:  # some servers ignore n: ask again for the rest
            body["n"] = n - len(texts)
            if self.chat:
                messages = [{"role": role, "content": content} for role, content in request.messages]
                reply = self.client.post("/chat/completions", {**body, "messages": messages})
                got = [c["message"]["content"] or "" for c in reply["choices"]]
            else:
                reply = self.client.post("/completions", {**body, "prompt": request.prompt})
                got = [c["text"] for c in reply["choices"]]
            if not got:
                raise EndpointError(f"{self.base_url} returned no choices")
            texts += got
        return texts[:n]

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
