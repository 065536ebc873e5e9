"""examples/deploy/kubernetes.yaml: valid for a pinned Kubernetes, and what it runs is what mcpwrap
needs to scale out (README, "Serving over HTTP"): replicas of `serve --http` sharing a secret file
and a state directory on a ReadWriteMany volume, a token file, non-root and a read-only root, and an
ingress that keeps a client's legacy session on the replica that opened it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from mcpwrap.config import load as config

ROOT = Path(__file__).parents[2]
MANIFESTS = ROOT / "examples" / "deploy" / "kubernetes.yaml"
KUBERNETES = "1.31.0"                  # the oldest release still maintained when this was written


def manifests() -> dict[str, dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all(MANIFESTS.read_text()) if d]
    by_kind = {d["kind"]: d for d in docs}
    assert len(by_kind) == len(docs)
    return by_kind


@pytest.mark.parametrize("kind", ["Secret", "ConfigMap", "PersistentVolumeClaim", "Deployment", "Service", "Ingress"])
def test_each_manifest_is_valid_for_the_pinned_kubernetes(kind: str) -> None:
    kubernetes_validate.validate(manifests()[kind], KUBERNETES, strict=True)


def serve_command() -> tuple[dict[str, Any], dict[str, str]]:
    """The mcpwrap container, and its `serve` options with their values."""
    (container,) = manifests()["Deployment"]["spec"]["template"]["spec"]["containers"]
    words = container["command"]
    assert words[:4] == ["python", "-m", "mcpwrap", "serve"], words
    options = {}
    for i, word in enumerate(words):
        if word.startswith("--"):
            value = words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("--") else ""
            options[word] = value
    return container, options


def test_replicas_serve_http_with_a_token_and_share_the_secret_and_the_state_directory() -> None:
    import typer

    from mcpwrap.cli.completion import build_app

    by_kind = manifests()
    pod = by_kind["Deployment"]["spec"]["template"]["spec"]
    assert by_kind["Deployment"]["spec"]["replicas"] >= 2
    container, options = serve_command()
    serve = typer.main.get_command(build_app()).commands["serve"]   # type: ignore[attr-defined]
    known = {o for p in serve.params for o in (*p.opts, *getattr(p, "secondary_opts", ()))}
    assert set(options) <= known, set(options) - known
    assert {"--http", "--token-file", "--secret-file", "--state-dir"} <= set(options)
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    state = volumes[mounts[str(Path(options["--state-dir"]).parent)]]
    claim = by_kind["PersistentVolumeClaim"]
    assert state["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    # The secret and the tokens come from the Secret, copied by the init step into a private directory.
    private = str(Path(options["--secret-file"]).parent)
    assert Path(options["--token-file"]).parent == Path(private) and volumes[mounts[private]]["emptyDir"]
    (init,) = pod["initContainers"]
    copied = " ".join(init["args"])
    assert f"install -m 0600 /secret-volume/secret {options['--secret-file']}" in copied
    assert f"install -m 0600 /secret-volume/tokens {options['--token-file']}" in copied
    secret = by_kind["Secret"]
    assert {"secret", "tokens"} <= set(secret["stringData"])
    assert volumes["secret"]["secret"]["secretName"] == secret["metadata"]["name"]
    port = options["--http"].rsplit(":", 1)[1]
    assert [p["containerPort"] for p in container["ports"]] == [int(port)]


def test_every_step_runs_as_a_non_root_user_on_a_read_only_root() -> None:
    pod = manifests()["Deployment"]["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    for container in pod["initContainers"] + pod["containers"]:
        context = container["securityContext"]
        assert context["readOnlyRootFilesystem"] is True and context["allowPrivilegeEscalation"] is False
        assert context["capabilities"]["drop"] == ["ALL"]


def test_the_ingress_keeps_a_client_on_one_replica_by_a_header_initialize_carries_too() -> None:
    """A legacy session lives where `initialize` was answered; the ingress must choose that replica
    for its later requests too, so it hashes on a header sent with `initialize` as well as after it
    (the bearer token), not on Mcp-Session-Id, which only the answer to `initialize` brings."""
    by_kind = manifests()
    ingress = by_kind["Ingress"]
    key = ingress["metadata"]["annotations"]["nginx.ingress.kubernetes.io/upstream-hash-by"]
    assert key == "$http_authorization"
    _, options = serve_command()
    assert options["--token-file"]                  # so every request of a client carries the token
    (rule,) = ingress["spec"]["rules"]
    (path,) = rule["http"]["paths"]
    assert path["path"] == "/mcp" and path["backend"]["service"]["name"] == by_kind["Service"]["metadata"]["name"]


def test_the_tools_file_of_the_config_map_checks() -> None:
    text = manifests()["ConfigMap"]["data"]["tools.toml"]
    assert config.loads(text.encode(), Path("tools.toml")).tools
