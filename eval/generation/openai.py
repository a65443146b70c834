"""OpenAI-compatible HTTP servers (OpenAI, vLLM's server, TGI, llama.cpp, ...).

Chat models go to `/chat/completions` with the PythonEditGPT messages, base models to
`/completions` with the text prompt. Requests run concurrently up to `concurrency`; a
connection error, a timeout, 429 or 5xx is retried with exponential backoff, and after
`max_retries` the run stops with an error that names the endpoint (samples already
written stay in samples.jsonl, so a rerun continues).
"""

from __future__ import annotations

import json
import os
import random
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed

from eval.generation.base import GenerationRequest, SamplingConfig

RETRYABLE = {408, 409, 429, 500, 502, 503, 504}


class EndpointError(RuntimeError):
    """The endpoint kept failing (or refused the request); finished samples are kept."""


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
        self.api_key = os.environ.get(api_key_env, "")
        self.concurrency, self.max_retries = concurrency, max_retries
        self.backoff_s, self.timeout_s = backoff_s, timeout_s

    def _post(self, path: str, body: dict) -> dict:
        url = f"{self.base_url}{path}"
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        last = ""
        for attempt in range(self.max_retries + 1):
            request = urllib.request.Request(
                url, data=json.dumps(body).encode(), headers=headers, method="POST"
            )
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    return json.loads(response.read())
            except urllib.error.HTTPError as err:
                last = f"HTTP {err.code}: {err.read()[:300].decode(errors='replace')}"
                if err.code not in RETRYABLE:
                    raise EndpointError(f"{url} refused the request ({last})") from err
            except (urllib.error.URLError, TimeoutError, ConnectionError, json.JSONDecodeError) as err:
                last = f"{type(err).__name__}: {err}"
            if attempt < self.max_retries:
                time.sleep(self.backoff_s * 2**attempt * (0.5 + random.random() / 2))
        raise EndpointError(f"{url} failed {self.max_retries + 1} times; last error: {last}")

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
                reply = self._post("/chat/completions", {**body, "messages": messages})
                got = [c["message"]["content"] or "" for c in reply["choices"]]
            else:
                reply = self._post("/completions", {**body, "prompt": request.prompt})
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
