"""The deployment files hold together: compose, .env.example, the Slack manifest and the docs.

The compose file is checked as written (YAML) and, where a compose binary exists, as compose
itself renders it with `.env.example` as its env file. Nothing here starts a container.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.cli.main import build_parser
from tests.conftest import FIXTURES, SPEC, need_shared

REPO = Path(__file__).resolve().parents[1]
COMPOSE = REPO / "docker-compose.yml"
ENV_EXAMPLE = REPO / ".env.example"
MANIFEST = REPO / "config" / "slack-manifest.yml"
DOCS = sorted((REPO / "docs").glob("*.md"))
SERVICES = {"redis", "postgres", "bot", "beat", "worker"}
SPECBENCH_SERVICES = ("bot", "beat", "worker")
_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")


# --- compose ---------------------------------------------------------------------------------


def _compose_binary() -> list[str] | None:
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=30)
        if probe.returncode == 0:
            return ["docker", "compose"]
    return None


def _rendered() -> dict[str, Any]:
    binary = _compose_binary()
    if binary is None:
        pytest.skip("no docker-compose or docker compose here; the YAML check stands alone")
    result = subprocess.run(
        [*binary, "--env-file", str(ENV_EXAMPLE), "-f", str(COMPOSE), "config"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, f"compose config failed:\n{result.stderr}"
    data = yaml.safe_load(result.stdout)
    assert isinstance(data, dict)
    return data


def _raw() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


@pytest.fixture(params=["yaml", "compose-config"], scope="module")
def compose(request: pytest.FixtureRequest) -> dict[str, Any]:
    return _raw() if request.param == "yaml" else _rendered()


def _command(service: dict[str, Any]) -> str:
    command = service.get("command", "")
    return command if isinstance(command, str) else " ".join(str(c) for c in command)


def _environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


def _mounts(service: dict[str, Any]) -> Iterator[tuple[str, str, bool]]:
    """(source, target, read_only) of each volume, in short or long syntax."""
    for volume in service.get("volumes", []):
        if isinstance(volume, str):
            # SOURCE:TARGET[:MODE], read from the right: an unrendered SOURCE may hold `${X:-y}`.
            parts = volume.split(":")
            mode = parts.pop().split(",") if len(parts) > 2 and "/" not in parts[-1] else []
            yield ":".join(parts[:-1]), parts[-1], "ro" in mode
        else:
            yield str(volume.get("source", "")), volume["target"], bool(volume.get("read_only"))


def test_compose_has_the_five_services(compose: dict[str, Any]) -> None:
    assert SERVICES <= set(compose["services"])


def test_every_service_has_a_healthcheck_and_a_restart_policy(compose: dict[str, Any]) -> None:
    for name in SERVICES:
        service = compose["services"][name]
        assert service.get("healthcheck", {}).get("test"), f"{name}: no healthcheck"
        assert service.get("restart") in {"always", "unless-stopped", "on-failure"}, name


def test_specbench_services_wait_for_healthy_redis_and_postgres(compose: dict[str, Any]) -> None:
    for name in SPECBENCH_SERVICES:
        depends = compose["services"][name]["depends_on"]
        assert isinstance(depends, dict), f"{name}: depends_on without conditions"
        for needed in ("redis", "postgres"):
            assert depends[needed]["condition"] == "service_healthy", (name, needed)
        health = _command({"command": compose["services"][name]["healthcheck"]["test"]})
        assert "jobs.ops.health" in health and name in health, (name, health)


def test_redis_persists_with_aof(compose: dict[str, Any]) -> None:
    redis = compose["services"]["redis"]
    assert re.search(r"--appendonly\s+yes", _command(redis))
    assert any(target == "/data" for _, target, _ in _mounts(redis))


def test_postgres_keeps_its_data_in_a_named_volume(compose: dict[str, Any]) -> None:
    postgres = compose["services"]["postgres"]
    sources = {src for src, target, _ in _mounts(postgres) if target.startswith("/var/lib/")}
    named = set(compose.get("volumes") or {})
    assert sources & named, f"postgres data {sources} is not a named volume ({named})"


def test_bot_runs_in_socket_mode(compose: dict[str, Any]) -> None:
    bot = compose["services"]["bot"]
    args = shlex.split(_command(bot))
    assert args[:2] == ["specbench", "bot"] and "--http" not in args
    env = _environment(bot)
    assert {"SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"} <= set(env)


def test_exactly_one_beat(compose: dict[str, Any]) -> None:
    beats = [name for name, s in compose["services"].items()
             if re.search(r"\bbeat\b", _command(s))]
    assert beats == ["beat"]
    beat = compose["services"]["beat"]
    assert beat.get("deploy", {}).get("replicas", 1) == 1
    assert "scale" not in beat


def test_worker_reserves_the_gpus_and_mounts_the_models_read_only(
    compose: dict[str, Any],
) -> None:
    worker = compose["services"]["worker"]
    devices = worker["deploy"]["resources"]["reservations"]["devices"]
    assert any(d["driver"] == "nvidia" and "gpu" in d["capabilities"] for d in devices)
    assert worker["ipc"] == "host"
    assert any(target == "/models" and ro for _, target, ro in _mounts(worker))
    assert "SPECBENCH_QUEUE" in _environment(worker)
    assert shlex.split(_command(worker))[:2] == ["specbench", "worker"]
    assert "Dockerfile.worker" in str(worker["build"]["dockerfile"])
    assert not {"SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"} & set(_environment(worker))  # no Slack


def test_dockerfiles_exist_and_the_worker_builds_on_sglang() -> None:
    bot = (REPO / "docker" / "Dockerfile").read_text(encoding="utf-8")
    worker = (REPO / "docker" / "Dockerfile.worker").read_text(encoding="utf-8")
    extras = re.search(r"^ARG SPECBENCH_EXTRAS=(\S+)$", bot, re.M)
    assert extras, "docker/Dockerfile names no SPECBENCH_EXTRAS"
    chosen = set(extras.group(1).split(","))
    assert {"slack", "distributed", "postgres"} <= chosen and "local" not in chosen  # no torch
    assert re.search(r"^FROM \$\{PYTHON_IMAGE\}", bot, re.M) and "slim" in bot
    assert re.search(r"^ARG SGLANG_IMAGE=lmsysorg/sglang:", worker, re.M)
    assert re.search(r"^FROM \$\{SGLANG_IMAGE\}", worker, re.M)
    assert "SPECBENCH_SGLANG_PYTHON" in worker


def _image_tags() -> dict[str, str]:
    """The SGLang image each deployment file names, by file."""
    worker = (REPO / "docker" / "Dockerfile.worker").read_text(encoding="utf-8")
    compose = _raw()["services"]["worker"]["build"]["args"]["SGLANG_IMAGE"]
    default = re.fullmatch(r"\$\{SGLANG_IMAGE:-([^}]+)\}", str(compose))
    example = re.search(r"^SGLANG_IMAGE=(\S+)$", ENV_EXAMPLE.read_text(encoding="utf-8"), re.M)
    arg = re.search(r"^ARG SGLANG_IMAGE=(\S+)$", worker, re.M)
    assert default and example and arg, "a deployment file names no SGLang image"
    return {"docker-compose.yml": default.group(1), ".env.example": example.group(1),
            "docker/Dockerfile.worker": arg.group(1)}


def test_one_pinned_sglang_image_everywhere_and_in_the_docs() -> None:
    tags = _image_tags()
    assert len(set(tags.values())) == 1, tags
    image = tags["docker-compose.yml"]
    assert re.fullmatch(r"lmsysorg/sglang:v\d+\.\d+\.\d+(-cu\d+)?", image), image
    assert image in (REPO / "docs" / "deploying.md").read_text(encoding="utf-8")


def test_the_pinned_sglang_release_accepts_every_shipped_preset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a new user gets from `docker compose up`: preflight on that release's own flag set
    (generated from its wheel, tests/standin/sglang/flags) refuses no configuration."""
    from jobs.core.plans import load_all, resolve
    from jobs.engines.sglang.engine import SGLangEngine
    from tests.standin.harness import STANDIN, make_standin

    image = _image_tags()["docker-compose.yml"]
    version = re.search(r":v(\d+\.\d+\.\d+)", image).group(1)  # type: ignore[union-attr]
    assert (STANDIN / "sglang" / "flags" / f"{version}.json").is_file(), (
        f"no flag set of SGLang {version}: run scripts/sglang_flags.py {version}")
    make_standin(tmp_path, monkeypatch)
    monkeypatch.setenv("STANDIN_VERSION", version)
    presets = [p for p in load_all() if p.engine == "sglang"]
    assert presets, "no shipped SGLang preset"
    for preset in presets:
        plan = resolve(preset)
        every = dataclasses.replace(plan, configs=(*plan.configs, *plan.points))  # sweeps too
        assert SGLangEngine().preflight(every) == {}, f"{preset.name} on SGLang {version}"


# --- .env.example ----------------------------------------------------------------------------


def _spec_variables() -> set[str]:
    text = need_shared(SPEC).read_text(encoding="utf-8")
    section = text.split("## Environment", 1)[1].split("\n## ", 1)[0]
    names: set[str] = set()
    for line in section.splitlines():
        if line.startswith("|"):
            first_cell = line.strip("|").split("|")[0]
            names.update(n for n in re.findall(r"`([^`]+)`", first_cell) if _NAME.match(n))
    assert len(names) >= 10, f"could not read SPEC.md's environment table: {names}"
    return names


def _example_variables() -> set[str]:
    """Names set (`NAME=...`) or shown commented out (`# NAME=...`) in .env.example."""
    found = re.findall(r"^#?\s*([A-Z][A-Z0-9_]*)=", ENV_EXAMPLE.read_text(encoding="utf-8"), re.M)
    return set(found)


def test_env_example_covers_every_spec_variable() -> None:
    missing = _spec_variables() - _example_variables()
    assert not missing, f".env.example lacks {sorted(missing)}"


def test_env_example_comments_every_variable() -> None:
    lines = ENV_EXAMPLE.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^[A-Z][A-Z0-9_]*=", line):
            assert i > 0 and lines[i - 1].startswith("#"), f"no comment above {line!r}"


def test_env_example_holds_no_real_secret() -> None:
    for line in ENV_EXAMPLE.read_text(encoding="utf-8").splitlines():
        name, _, value = line.partition("=")
        if _NAME.match(name) and any(w in name for w in ("TOKEN", "SECRET", "PASSWORD")):
            assert value == "" or "replace-me" in value or "change-me" in value, line


def test_every_compose_variable_is_in_env_example() -> None:
    used = set(re.findall(r"(?<!\$)\$\{([A-Z][A-Z0-9_]*)", COMPOSE.read_text(encoding="utf-8")))
    missing = used - _example_variables()
    assert not missing, f"docker-compose.yml reads {sorted(missing)}, not in .env.example"


# --- the Slack manifest ----------------------------------------------------------------------


def test_manifest_declares_the_app() -> None:
    manifest = yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))
    assert manifest["display_information"]["name"]
    assert manifest["features"]["bot_user"]["display_name"]
    commands = {c["command"]: c for c in manifest["features"]["slash_commands"]}
    specbench = commands["/specbench"]
    assert specbench["description"]
    assert "url" in specbench or "should_escape" in specbench
    scopes = manifest["oauth_config"]["scopes"]["bot"]
    # the history scopes let a restarted bot find a post that reached Slack as its predecessor
    # died (docs/contracts.md "Chat posts happen once"); nothing more is read
    assert sorted(scopes) == sorted(["commands", "chat:write", "files:write",
                                     "channels:history", "groups:history"]), scopes
    assert manifest["settings"]["interactivity"]["is_enabled"] is True
    assert manifest["settings"]["socket_mode_enabled"] is True
    assert "event_subscriptions" not in manifest.get("settings", {})


# --- the docs --------------------------------------------------------------------------------

_OPERATOR = {"&&", "||", ";", "|", "&"}
_VALUE_OPTIONS = {"-e", "--env", "-u", "--user", "-w", "--workdir", "--entrypoint", "--name"}
_SHELL_VARIABLES = {"PWD", "HOME", "PATH", "USER", "NAME"}  # NAME: the ${NAME} placeholder


def _code_lines(path: Path) -> Iterator[str]:
    inside = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            inside = not inside
        elif inside:
            yield line.strip().removeprefix("$ ")


def _segments(line: str) -> Iterator[list[str]]:
    try:
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        tokens = list(lexer)
    except ValueError:
        return
    segment: list[str] = []
    for token in tokens:
        if token in _OPERATOR:
            yield segment
            segment = []
        else:
            segment.append(token)
    yield segment


def _specbench_args(tokens: list[str]) -> list[str] | None:
    """The arguments of a `specbench` command, bare or inside `docker compose exec|run`."""
    while tokens and re.match(r"^[A-Z_][A-Z0-9_]*=", tokens[0]):
        tokens = tokens[1:]
    if tokens[:1] == ["sudo"]:
        tokens = tokens[1:]
    if tokens[:2] == ["docker", "compose"] or tokens[:1] == ["docker-compose"]:
        rest = tokens[2:] if tokens[0] == "docker" else tokens[1:]
        if not rest or rest[0] not in {"exec", "run"}:
            return None
        rest = rest[1:]
        while rest and rest[0].startswith("-"):
            rest = rest[2:] if rest[0] in _VALUE_OPTIONS else rest[1:]
        tokens = rest[1:]  # past the service name
    if not tokens or not (tokens[0] == "specbench" or tokens[0].endswith("/bin/specbench")):
        return None
    args = tokens[1:]
    for i, token in enumerate(args):  # stop at a redirection: `> out`, `2> err`
        if token[:1] in {"<", ">"}:
            return args[: i - 1] if i and args[i - 1].isdigit() else args[:i]
    return args


def _doc_commands() -> list[tuple[str, list[str]]]:
    found = []
    for path in [*DOCS, REPO / "README.md"]:
        if path.is_file():
            for line in _code_lines(path):
                for segment in _segments(line):
                    args = _specbench_args(segment)
                    if args is not None:
                        found.append((f"{path.name}: {line}", args))
    return found


def test_the_docs_show_commands() -> None:
    assert len(_doc_commands()) >= 10


@pytest.mark.parametrize(("where", "args"), _doc_commands(), ids=lambda v: str(v)[:60])
def test_every_documented_command_parses(where: str, args: list[str]) -> None:
    try:
        parsed = build_parser().parse_args(args)
    except SystemExit as exc:
        if exc.code == 0:  # --help, --version
            return
        pytest.fail(f"{where}: does not parse ({exc.code})")
    assert parsed.command is not None or parsed.version, where


def test_every_variable_the_docs_name_is_documented() -> None:
    known = _spec_variables() | _example_variables()
    named: dict[str, str] = {}
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for name in re.findall(r"\b((?:SPECBENCH|SLACK)_[A-Z0-9_]+)\b", text):
            named.setdefault(name, path.name)
        for name in re.findall(r"\$\{?([A-Z][A-Z0-9_]*)", text):
            if name not in _SHELL_VARIABLES:
                named.setdefault(name, path.name)
    unknown = {name: where for name, where in named.items() if name not in known}
    assert not unknown, f"named in the docs, documented nowhere: {unknown}"


def test_the_docs_link_each_other_and_exist() -> None:
    names = {p.name for p in DOCS}
    assert {"deploying.md", "scaling.md", "upgrading.md", "security.md"} <= names
    for path in DOCS:
        for target in re.findall(r"\]\(([^)#:]+\.(?:md|yml))\)", path.read_text(encoding="utf-8")):
            assert (path.parent / target).resolve().is_file(), f"{path.name} links {target}"


# --- docs/contracts.md: the contracts a user needs, in the repository ------------------------

CONTRACTS = REPO / "docs" / "contracts.md"


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_the_contracts_page_names_every_command_and_its_options() -> None:
    text = CONTRACTS.read_text(encoding="utf-8")
    rows = {line.split("`")[1].split()[1]: line for line in text.splitlines()
            if line.startswith("| `specbench ")}
    for name, sub in _subcommands().items():
        assert name in rows, f"docs/contracts.md has no row for `specbench {name}`"
        for action in sub._actions:
            for option in action.option_strings:
                if option.startswith("--") and option != "--help":
                    assert option in rows[name], f"`specbench {name}` row lacks {option}"


def test_the_contracts_page_names_every_variable_the_settings_read() -> None:
    text = CONTRACTS.read_text(encoding="utf-8")
    read = set(re.findall(r"\"((?:SPECBENCH|SLACK)_[A-Z0-9_]+)\"",
                          (REPO / "jobs" / "settings.py").read_text(encoding="utf-8")))
    assert read, "jobs/settings.py reads no variables?"
    missing = sorted(name for name in read if f"`{name}`" not in text)
    assert not missing, f"read by jobs/settings.py, not in docs/contracts.md: {missing}"


def test_the_readme_and_docs_point_to_files_the_repository_holds() -> None:
    for path in [*DOCS, REPO / "README.md"]:
        text = path.read_text(encoding="utf-8")
        assert "SPEC.md" not in text, f"{path.name} names SPEC.md, which is not in the repository"


def test_the_readmes_example_session_is_the_recorded_seed_session() -> None:
    """README's `analyze docs/examples/seed-session.jsonl` runs on a fresh clone: the copy is
    the article's recorded session as shared/fixtures holds it."""
    example = REPO / "docs" / "examples" / "seed-session.jsonl"
    assert example.read_bytes() == need_shared(FIXTURES / "seed-session.jsonl").read_bytes()


def test_the_code_cites_the_repositorys_own_contract() -> None:
    """bot/, jobs/, templates/ and config/ cite docs/contracts.md (and its section names), never
    a file a maintainer of this repository cannot open."""
    found = [f"{path.relative_to(REPO)}:{number}"
             for top in ("bot", "jobs", "templates", "config")
             for path in (REPO / top).rglob("*") if path.is_file() and "__pycache__" not in
             path.parts and path.suffix in (".py", ".j2", ".yaml", ".yml", ".json")
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if "SPEC.md" in line]
    assert found == []
