"""An OpenAI-compatible HTTP client (OpenAI, vLLM's server, TGI, llama.cpp, ...), standard library only.

Shared by evaluation's `openai` backend and the data pipeline's LLM steps (novel-API task
generation, docstring rewrites, validation with a served model), each configured by one
`EndpointConfig`. A connection error, a timeout, 429 or 5xx is retried with exponential
backoff; after `max_retries` (or on another HTTP error) it raises `EndpointError`, which
names the endpoint.
"""

from __future__ import annotations

import json
import os
import random
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

RETRYABLE = {408, 409, 429, 500, 502, 503, 504}


class EndpointError(RuntimeError):
    """The endpoint kept failing (or refused the request)."""


@dataclass
class EndpointConfig:
    """An OpenAI-compatible server and how patiently to call it: the one set of endpoint keys.

    Eval's `backend` and the novel-API pipeline's `prose`, `tasks.llm` and `checks` extend it, so
    their keys stay flat (`backend.base_url=...`) and each hands itself to `OpenAIClient` whole.
    """

    base_url: str = "https://api.openai.com/v1"
    api_key_env: str = "OPENAI_API_KEY"  # the variable holding the key; unset: no Authorization header
    max_retries: int = 6
    backoff_s: float = 1.0  # the first retry's wait, doubled for each retry after it (with jitter)
    timeout_s: float = 120.0  # per request


class OpenAIClient:
    def __init__(self, endpoint: EndpointConfig) -> None:
        self.endpoint = endpoint

    def post(self, path: str, body: dict) -> dict:
        end = self.endpoint
        url = f"{end.base_url.rstrip('/')}{path}"
        headers = {"Content-Type": "application/json"}
        api_key = os.environ.get(end.api_key_env, "")
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        last = ""
        for attempt in range(end.max_retries + 1):
            request = urllib.request.Request(
                url, data=json.dumps(body).encode(), headers=headers, method="POST"
            )
            try:
                with urllib.request.urlopen(request, timeout=end.timeout_s) as response:
                    return json.loads(response.read())
            except urllib.error.HTTPError as err:
                last = f"HTTP {err.code}: {err.read()[:300].decode(errors='replace')}"
                if err.code not in RETRYABLE:
                    raise EndpointError(f"{url} refused the request ({last})") from err
            except (urllib.error.URLError, TimeoutError, ConnectionError, json.JSONDecodeError) as err:
                last = f"{type(err).__name__}: {err}"
            if attempt < end.max_retries:
                time.sleep(end.backoff_s * 2**attempt * (0.5 + random.random() / 2))
        raise EndpointError(f"{url} failed {end.max_retries + 1} times; last error: {last}")

    def chat(self, model: str, messages: list[dict[str, str]], n: int = 1, **sampling: Any) -> list[str]:
        """`n` replies to `messages` from `/chat/completions`."""
        body = {"model": model, "messages": messages, **sampling}
        return self._choices("/chat/completions", body, n, lambda c: c["message"]["content"] or "")

    def complete(self, model: str, prompt: str, n: int = 1, **sampling: Any) -> list[str]:
        """`n` continuations of `prompt` from `/completions` (base models)."""
        body = {"model": model, "prompt": prompt, **sampling}
        return self._choices("/completions", body, n, lambda c: c["text"])

    def _choices(self, path: str, body: dict, n: int, text: Callable[[dict], str]) -> list[str]:
        """`n` texts, asked again for the rest: some servers ignore `n`."""
        texts: list[str] = []
        while len(texts) < n:
            reply = self.post(path, {**body, "n": n - len(texts)})
            got = [text(c) for c in reply.get("choices", [])]
            if not got:
                raise EndpointError(f"{self.endpoint.base_url} returned no choices")
            texts += got
        return texts[:n]
