"""The LLM task generator and C2/C3 validation against a local OpenAI-compatible endpoint that
answers with scripted replies (the real client, prompts, parsing, harness and sandbox)."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler

import pytest
from conftest import JSONHandler, local_server
from hydra.errors import ConfigCompositionException
from test_novel_tasks import BUNDLE, python, sandbox  # noqa: F401  (fixtures)

from core.entry import validate_overrides
from core.openai_client import EndpointConfig, OpenAIClient
from data_pipeline.novel_api.app import APP, ValidateConfig
from data_pipeline.novel_api.llm_tasks import LLMTaskGenerator, parse_reply
from data_pipeline.novel_api.tasks import TODO, build_tasks
from data_pipeline.novel_api.validate import validate_tasks


class _Scripted(JSONHandler, BaseHTTPRequestHandler):
    replies: list[str] = []

    def do_POST(self):  # noqa: N802
        body = self.read_json()
        texts = [type(self).replies.pop(0) for _ in range(body.get("n", 1))]
        self.reply_json({"choices": [{"message": {"content": t}} for t in texts]})


@pytest.fixture
def endpoint():
    with local_server(_Scripted) as url:
        yield f"{url}/v1"


REFERENCE = "import novlib.text\n\n\ndef solve(n):\n    result = novlib.text.slugify('A b C', max_len=n)\n    return result\n"
GOOD = {
    "description": "Turn a title into a URL slug, at most n characters long.",
    "reference": REFERENCE,
    "context": REFERENCE.replace("    result = novlib.text.slugify('A b C', max_len=n)\n", f"    {TODO}\n"),
    "call": "solve(3)",
}


def test_llm_tasks_are_parsed_filtered_and_checked(endpoint, sandbox):  # noqa: F811
    names_it = {**GOOD, "description": "Call slugify on a title."}
    _Scripted.replies = ["Here it is:\n" + json.dumps(GOOD), json.dumps(names_it), "not json at all"]
    cfg = validate_overrides(
        APP,
        [
            "stage=tasks",
            "tasks.generator=llm",
            "tasks.llm.model=m",
            f"tasks.llm.base_url={endpoint}",
            "tasks.llm.api_key_env=NONE",
            "tasks.llm.temperature=0.0",
        ],
    )
    generator = LLMTaskGenerator.from_config(cfg.tasks.llm)
    tasks, manifest = build_tasks([BUNDLE], sandbox, generator)
    assert [t["level"] for t in tasks] == [1] and tasks[0]["c1"] and "'a-b'" in tasks[0]["tests"]
    assert parse_reply("{}") is None and parse_reply(json.dumps(GOOD)) == GOOD


def test_c2_and_c3_keep_only_new_and_solvable_tasks(endpoint, sandbox):  # noqa: F811
    tasks, _ = build_tasks([BUNDLE], sandbox)
    task = tasks[0]  # L1: solve()
    solved = "```python\n" + task["reference"] + "\n```"
    wrong = "```python\ndef solve():\n    return 'nope'\n```"
    cfg = ValidateConfig(base_model="base", strong_model="strong", base_url=endpoint, api_key_env="NONE")
    # task kept: base fails 3 of 3, strong solves; same task again: base solves 2 of 3 -> dropped (C2)
    _Scripted.replies = [wrong, wrong, wrong, solved, solved, solved, wrong]
    kept, manifest = validate_tasks(
        [task, {**task, "id": "again"}], {BUNDLE["qualname"]: BUNDLE}, sandbox, cfg
    )
    assert [t["id"] for t in kept] == [task["id"]] and kept[0]["c2"] is True and kept[0]["c3"] is True
    assert manifest["dropped"] == {"c2_base_model_solves": 1}
    skipped = ValidateConfig(base_url=endpoint, api_key_env="NONE")
    kept, manifest = validate_tasks([task], {BUNDLE["qualname"]: BUNDLE}, sandbox, skipped)
    assert kept[0]["c2"] is None and manifest["c2"] == "skipped"


def test_prose_rewrite_keeps_the_docstring(endpoint):
    from data_pipeline.novel_api.prose import rewrite_prose

    _Scripted.replies = ["It joins the words of the text with a separator.", ""]
    client = OpenAIClient(EndpointConfig(endpoint, "NONE", max_retries=0))
    bundles, counts = rewrite_prose([BUNDLE, BUNDLE], client, "m")
    assert (
        bundles[0]["M"]["prose"].startswith("It joins")
        and bundles[0]["M"]["prose_docstring"] == BUNDLE["M"]["prose"]
    )
    assert bundles[1]["M"]["prose"] == BUNDLE["M"]["prose"] and counts == {
        "rewritten": 1,
        "kept_docstring": 1,
    }


def test_each_llm_step_takes_the_endpoint_keys_and_rejects_others():
    cfg = validate_overrides(APP, ["stage=tasks", "prose.max_retries=0", "checks.timeout_s=5"])
    assert cfg.prose.max_retries == 0 and cfg.checks.timeout_s == 5
    with pytest.raises(ConfigCompositionException, match="tasks.llm.retries"):
        validate_overrides(APP, ["stage=tasks", "tasks.llm.retries=0"])


ASYNC_REFERENCE = (
    "import asyncio\nimport novlib.text\n\n\nasync def solve(n):\n    await asyncio.sleep(0)\n"
    "    result = novlib.text.slugify('A b C', max_len=n)\n    return result\n"
)


def test_both_routes_give_tasks_each_counted_and_an_async_one_runs_under_an_event_loop(endpoint, sandbox):  # noqa: F811
    from data_pipeline.novel_api.llm_tasks import both_routes
    from data_pipeline.novel_api.tasks import drafts

    written = {
        **GOOD,
        "reference": ASYNC_REFERENCE,
        "context": ASYNC_REFERENCE.replace(
            "    result = novlib.text.slugify('A b C', max_len=n)\n", f"    {TODO}\n"
        ),
        "call": "asyncio.run(solve(3))",
    }
    _Scripted.replies = [json.dumps(written), "no", "no"]
    cfg = validate_overrides(
        APP, ["stage=tasks", "tasks.generator=both", "tasks.llm.model=m", f"tasks.llm.base_url={endpoint}",
              "tasks.llm.api_key_env=NONE"],
    )  # fmt: skip
    generate = both_routes(drafts, LLMTaskGenerator.from_config(cfg.tasks.llm))
    tasks, manifest = build_tasks([BUNDLE], sandbox, generate)
    by_route = {route: [t for t in tasks if t["generator"] == route] for route in ("deterministic", "llm")}
    assert by_route["deterministic"] and [t["id"] for t in by_route["llm"]] == ["novlib.text.slugify/L1/llm"]
    assert manifest["per_generator"] == {k: len(v) for k, v in by_route.items()}
    llm = by_route["llm"][0]  # the model's async task: its tests run it with asyncio, which they never import
    assert llm["c1"] and "__import__('asyncio').run(solve(3))" in llm["tests"]
