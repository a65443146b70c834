"""An OpenAI-compatible HTTP client (OpenAI, vLLM's server, TGI, llama.cpp, ...), standard library only.

Shared by evaluation's `openai` backend and the data pipeline's LLM steps (novel-API task
generation, docstring rewrites, validation with a served model). A connection error, a
timeout, 429 or 5xx is retried with exponential backoff; after `max_retries` (or on another
HTTP error) it raises `EndpointError`, which names the endpoint.
"""

from __future__ import annotations

import json
import os
import random
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

RETRYABLE = {408, 409, 429, 500, 502, 503, 504}


class EndpointError(RuntimeError):
    """The endpoint kept failing (or refused the request)."""


@dataclass
class OpenAIClient:
    base_url: str = "https://api.openai.com/v1"
    api_key_env: str = "OPENAI_API_KEY"
    max_retries: int = 6
    backoff_s: float = 1.0
    timeout_s: float = 120.0

    def post(self, path: str, body: dict) -> dict:
        url = f"{self.base_url.rstrip('/')}{path}"
        headers = {"Content-Type": "application/json"}
        api_key = os.environ.get(self.api_key_env, "")
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
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

    def chat(self, model: str, messages: list[dict[str, str]], n: int = 1, **sampling) -> list[str]:
        """`n` replies to `messages` (asked again for the rest when a server ignores n)."""
        texts: list[str] = []
        while len(texts) < n:
            reply = self.post(
                "/chat/completions", {"model": model, "messages": messages, "n": n - len(texts), **sampling}
            )
            got = [c["message"]["content"] or "" for c in reply.get("choices", [])]
            if not got:
                raise EndpointError(f"{self.base_url} returned no choices")
            texts += got
        return texts[:n]
