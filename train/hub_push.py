"""`run.push_to_hub`: the final model folder, card included, uploaded to `run.hub_model_id`.

A push that cannot happen must not cost a training run: `check_push_access` (called by the
preflight, before data or model load) fails in one line when the hub is switched off
(`HF_HUB_OFFLINE=1`) or unreachable, no token is set, the hub refuses the token, or the token's
user may not write to the repo's namespace. `push_folder` runs on rank 0 once training and the
save are over, so no other rank waits on an upload at a collective.
"""

from __future__ import annotations

from pathlib import Path

from core.errors import ConfigError, UserError
from core.hub import offline_switch, unreachable_endpoint

LATER = "or train with run.push_to_hub=false and upload DIR/final afterwards (hf upload REPO DIR/final)"


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0][:200] if text else type(err).__name__


def check_push_access(repo_id: str) -> None:
    """Raise ConfigError unless this machine can push to `repo_id` now (one call to the hub)."""
    switch = offline_switch()
    if switch is not None:
        raise ConfigError(f"run.push_to_hub=true, but {switch}=1 switches the hub off; unset it, {LATER}")
    address = unreachable_endpoint()
    if address is not None:
        raise ConfigError(
            f"run.push_to_hub=true, but the hub ({address}) is unreachable; connect it, {LATER}"
        )
    from huggingface_hub import get_token, whoami

    token = get_token()
    if not token:
        raise ConfigError(
            f"run.push_to_hub=true, but no hub token is set; run `hf auth login` or set HF_TOKEN, {LATER}"
        )
    try:
        me = whoami(token=token)
    except Exception as err:  # an invalid or expired token, or the hub answering with an error
        raise ConfigError(
            f"run.push_to_hub=true, but the hub refused the token ({_first_line(err)}); {LATER}"
        ) from err
    role = (me.get("auth") or {}).get("accessToken", {}).get("role")
    if role == "read":
        raise ConfigError(
            f"run.push_to_hub=true, but the hub token is read-only; use a token with write access, {LATER}"
        )
    namespace = repo_id.split("/")[0] if "/" in repo_id else me.get("name")
    allowed = {me.get("name"), *(org.get("name") for org in me.get("orgs") or [])}
    if namespace not in allowed:
        raise ConfigError(
            f"run.hub_model_id={repo_id!r}: the token's user {me.get('name')!r} may not write to "
            f"{namespace!r} (its namespaces: {', '.join(sorted(n for n in allowed if n))}); fix the id, {LATER}"
        )


def push_folder(folder: Path, repo_id: str, private: bool | None, message: str) -> str:
    """Create `repo_id` if needed and upload `folder` as one commit; returns the commit's URL."""
    from huggingface_hub import HfApi

    api = HfApi()
    try:
        # The hub answers with the full id: "name" alone lands in the token user's namespace.
        full_id = api.create_repo(repo_id, private=private, exist_ok=True).repo_id
        commit = api.upload_folder(repo_id=full_id, folder_path=str(folder), commit_message=message)
    except Exception as err:  # the hub went away or refused during the run: the model is safe on disk
        raise UserError(
            f"pushing {folder} to {repo_id} failed ({_first_line(err)}); the model is saved there: "
            f"upload it with `hf upload {repo_id} {folder}`"
        ) from err
    return commit.commit_url
