"""Generation backends: hf on a tiny CPU model, openai against a real local HTTP server, oracles."""

from __future__ import annotations

from dataclasses import replace
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from conftest import JSONHandler, local_server

from core.benchmarks import load_benchmark
from core.formats import FORMATS
from core.openai_client import EndpointConfig
from eval.generate import build_requests, generate_samples
from eval.generation import SamplingConfig, oracle_generator
from eval.generation.hf import HFGenerator
from eval.generation.openai import EndpointError, OpenAIGenerator
from eval.samples import SampleStore

FMT = FORMATS["editcoder"]


def _requests(n_problems: int = 3, fmt=FMT):
    problems = load_benchmark("fixtures").problems[:n_problems]
    return build_requests(problems, ["descriptive", "lazy"], fmt)


def test_oracles_answer_with_reference_and_before_code():
    requests = _requests(2)
    ref = dict(
        (r.problem.id + r.split, c)
        for r, c in oracle_generator("reference", FMT).generate(requests, 3, SamplingConfig())
    )
    ident = dict(
        (r.problem.id + r.split, c)
        for r, c in oracle_generator("identity", FMT).generate(requests, 1, SamplingConfig())
    )
    for r in requests:
        assert ref[r.problem.id + r.split] == [r.problem.after] * 3
        assert ident[r.problem.id + r.split] == [r.problem.before]


def test_hf_backend_samples_from_a_tiny_model_on_cpu(tiny_model_dir, tmp_path):
    generator = HFGenerator(path=str(tiny_model_dir), batch_size=2)
    store = SampleStore(tmp_path / "samples.jsonl")
    requests = _requests(2)
    made = generate_samples(store, requests, generator, FMT, 3, SamplingConfig(max_new_tokens=12, seed=1))
    assert made == 3 * len(requests)
    samples = store.of_type("sample")
    assert {k[2] for k in samples} == {0, 1, 2}
    assert all(
        isinstance(s["completion"], str) and s["prompt"].startswith("## Code Before:")
        for s in samples.values()
    )
    assert len({s["completion"] for s in samples.values()}) > 1  # sampling at temperature 0.2 varies


def test_hf_sampling_depends_only_on_the_seed_problem_split_and_index(tiny_model_dir, tmp_path):
    """A resumed run (topped up in steps), another batch size and a subset of the problems draw the
    completions one uninterrupted run draws (`SeededSampling`)."""
    sampling = SamplingConfig(max_new_tokens=10, seed=3, temperature=0.8, top_p=0.9)
    generators: dict = {}

    def completions(batch_size: int, steps: list[int], requests) -> dict:
        if batch_size not in generators:
            generators[batch_size] = HFGenerator(path=str(tiny_model_dir), batch_size=batch_size)
        name = f"{sampling.seed}-{batch_size}-{'-'.join(map(str, steps))}-{len(requests)}.jsonl"
        store = SampleStore(tmp_path / name)
        for n in steps:
            generate_samples(store, requests, generators[batch_size], FMT, n, sampling)
        return {key: sample["completion"] for key, sample in store.of_type("sample").items()}

    requests = _requests(2)
    whole = completions(4, [4], requests)
    assert len(whole) == 4 * len(requests) and len(set(whole.values())) > len(requests)
    assert completions(1, [4], requests) == whole
    assert completions(3, [1, 3, 4], requests) == whole  # resumed twice
    one = [r for r in requests if r.problem.id == requests[0].problem.id]
    assert completions(2, [2, 4], one) == {k: v for k, v in whole.items() if k[0] == requests[0].problem.id}
    sampling = replace(sampling, seed=4)
    assert completions(4, [4], requests) != whole  # the seed still decides


@pytest.fixture(scope="module")
def short_context_model(tiny_model_dir, tmp_path_factory) -> tuple[Path, int]:
    """The tiny model with a context 48 tokens longer than the longest test prompt, and that context."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    context = max(len(tokenizer(r.prompt)["input_ids"]) for r in _requests(2)) + 48
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    model.config.max_position_embeddings = context
    model.generation_config.eos_token_id = None  # never stop early: run into the limit
    out = tmp_path_factory.mktemp("short")
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out, context


def test_hf_backend_gives_each_request_what_its_prompt_leaves_of_the_context(short_context_model):
    from dataclasses import replace

    from transformers import AutoTokenizer

    path, context = short_context_model
    tokenizer = AutoTokenizer.from_pretrained(path)
    generator = HFGenerator(path=str(path), batch_size=1)

    def run(max_new_tokens: int, request) -> list[str]:
        [(_, texts)] = generator.generate([request], 2, SamplingConfig(max_new_tokens=max_new_tokens, seed=3))
        return texts

    for request in _requests(2)[:2]:
        room = context - len(tokenizer(request.prompt)["input_ids"])
        capped = run(8192, request)  # the paper's cap: the request ends where the context does
        assert capped == run(room, request)  # same seed, same budget: the same samples
        shorter = run(room - 4, request)
        assert shorter != capped and all(c.startswith(s) for c, s in zip(capped, shorter, strict=True))
    too_long = replace(request.problem, before="x = 1\n" * 200)
    [request] = build_requests([too_long], ["descriptive"], FMT)
    assert run(8192, request) == ["", ""]  # no room left: empty completions, no crash


class _Handler(JSONHandler, BaseHTTPRequestHandler):
    calls: list[dict] = []
    fail_first = 0
    die_after: int | None = None

    def do_POST(self):  # noqa: N802  (http.server's naming)
        body = self.read_json()
        cls = type(self)
        cls.calls.append({"path": self.path, **body})
        if cls.fail_first > 0 or (cls.die_after is not None and len(cls.calls) > cls.die_after):
            cls.fail_first -= 1
            self.send_response(503)
            self.end_headers()
            self.wfile.write(b"overloaded")
            return
        if self.path.endswith("/chat/completions"):
            user = body["messages"][-1]["content"]
            choices = [
                {"message": {"content": f"```python\n# {i}\n{user[:10]}\n```"}} for i in range(body["n"])
            ]
        else:
            choices = [{"text": f"x = {i}\n"} for i in range(min(body["n"], 2))]  # returns fewer than asked
        self.reply_json({"choices": choices})


@pytest.fixture
def server():
    _Handler.calls, _Handler.fail_first, _Handler.die_after = [], 0, None
    with local_server(_Handler) as url:
        yield f"{url}/v1"


def test_openai_chat_backend_sends_messages_and_extracts_code(server):
    fmt = FORMATS["chat"]
    requests = _requests(2, fmt)
    gen = OpenAIGenerator(
        "served-model", EndpointConfig(base_url=server, backoff_s=0.01), chat=True, concurrency=2
    )
    out = {r.problem.id + r.split: c for r, c in gen.generate(requests, 3, SamplingConfig(temperature=0.2))}
    assert len(out) == len(requests) and all(len(c) == 3 for c in out.values())
    call = _Handler.calls[0]
    assert call["model"] == "served-model" and call["temperature"] == 0.2 and call["top_p"] == 0.95
    assert call["messages"][0]["role"] == "system" and "PythonEditGPT" in call["messages"][0]["content"]
    assert fmt.extract(next(iter(out.values()))[1]).startswith("# 1\n")


def test_openai_completions_tops_up_when_the_server_returns_fewer(server):
    gen = OpenAIGenerator("m", EndpointConfig(base_url=server, backoff_s=0.01), chat=False)
    [(_, texts)] = list(gen.generate(_requests(1)[:1], 5, SamplingConfig()))
    assert len(texts) == 5 and [c["n"] for c in _Handler.calls] == [5, 3, 1]


def test_openai_retries_with_backoff_then_succeeds(server):
    _Handler.fail_first = 2
    gen = OpenAIGenerator("m", EndpointConfig(base_url=server, max_retries=3, backoff_s=0.01), chat=False)
    [(_, texts)] = list(gen.generate(_requests(1)[:1], 2, SamplingConfig()))
    assert len(texts) == 2 and len(_Handler.calls) == 3


def test_a_dead_endpoint_fails_clearly_and_keeps_finished_samples(server, tmp_path):
    _Handler.die_after = 2  # two requests succeed, then the server only answers 503
    store = SampleStore(tmp_path / "samples.jsonl")
    gen = OpenAIGenerator(
        "m", EndpointConfig(base_url=server, max_retries=2, backoff_s=0.01), chat=False, concurrency=1
    )
    requests = _requests(3)
    with pytest.raises(EndpointError, match="failed 3 times"):
        generate_samples(store, requests, gen, FMT, 2, SamplingConfig())
    finished = len(store.of_type("sample"))
    assert finished == 2 * 2 and len(SampleStore(tmp_path / "samples.jsonl").of_type("sample")) == finished
    _Handler.die_after = None
    made = generate_samples(store, requests, gen, FMT, 2, SamplingConfig())
    assert made == 2 * len(requests) - finished  # nothing finished is asked for again
    unreachable = OpenAIGenerator(
        "m", EndpointConfig(base_url="http://127.0.0.1:9/v1", max_retries=1, backoff_s=0.01), chat=False
    )
    with pytest.raises(EndpointError, match="127.0.0.1:9"):
        list(unreachable.generate(requests[:1], 1, SamplingConfig()))


def test_the_store_keeps_text_that_is_not_unicode_and_reads_it_back(tmp_path):
    """A lone surrogate (a program's exception message, a server's JSON escape \\ud800) is no UTF-8:
    the record is kept with the surrogate escaped, and a later run reads back the same text."""
    store = SampleStore(tmp_path / "samples.jsonl")
    head = {"type": "verdict", "problem": "p", "split": "python", "index": 0}
    store.append({**head, "detail": "ValueError: \ud800", "code": "é"})
    store.append({**head, "index": 1, "detail": "plain é"})
    store.append({**head, "index": 2, "detail": "a low half \udfff", "code": "\udfff\ud800"})
    store.append({**head, "index": 3, "detail": "in a key", "counts": {"\udc80": 1}})
    store.close()
    raw = (tmp_path / "samples.jsonl").read_bytes()
    assert b"\\ud800" in raw and "plain é".encode() in raw  # escaped where needed, UTF-8 elsewhere
    again = SampleStore(tmp_path / "samples.jsonl")
    assert again.of_type("verdict")[("p", "python", 0)]["detail"] == "ValueError: \ud800"
    assert again.of_type("verdict")[("p", "python", 1)]["detail"] == "plain é"
    assert again.of_type("verdict")[("p", "python", 2)]["code"] == "\udfff\ud800"
    assert again.of_type("verdict")[("p", "python", 3)]["counts"] == {"\udc80": 1}
    again.close()
