"""docker-compose.yml is written for real deployments (no Docker engine here): check what can be checked."""

from __future__ import annotations

import ast
import importlib
import ipaddress
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml
from django.core.management import get_commands

from tests.worker_zygote import python_run

ROOT = Path(__file__).resolve().parents[2]
APP_SERVICES = ("web", "worker", "gpu-worker", "beat")
ENV_READERS = {"getenv", "envbool", "envint", "envfloat", "envlist", "envpaths"}


@pytest.fixture(scope="module")
def compose():
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def variables_settings_read() -> set[str]:
    tree = ast.parse((ROOT / "subtlebench" / "settings.py").read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            function = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if function in ENV_READERS:
                names.add(node.args[0].value)
    return names


def commands_of(service: dict) -> list[list[str]]:
    """The command lines a service runs, with `sh -c "a && b"` split into its parts."""
    command = service["command"]
    words = command if isinstance(command, list) else shlex.split(command)
    if words[:2] == ["sh", "-c"]:
        return [shlex.split(part) for part in re.split(r"&&", words[2])]
    return [words]


def test_it_has_every_service_a_deployment_needs(compose):
    assert set(compose["services"]) >= {"postgres", "redis", *APP_SERVICES}


@pytest.mark.django_db  # importing the web's module runs its start check, which asks the database
@pytest.mark.parametrize("name", APP_SERVICES)
def test_every_command_names_a_real_module(compose, name):
    for words in commands_of(compose["services"][name]):
        program = words[0]
        if program == "gunicorn":
            module, _, attribute = words[1].partition(":")
            assert hasattr(importlib.import_module(module), attribute or "application")
        elif program == "celery":
            app_module = words[words.index("-A") + 1]
            assert importlib.import_module(app_module).celery_app.main == "subtlebench"
            if "worker" in words:
                from django.conf import settings

                routed = {"default"} | {route["queue"] for route in settings.CELERY_TASK_ROUTES.values()}
                queues = set(words[words.index("-Q") + 1].split(","))
                assert queues <= routed, f"{name} consumes queues no task is routed to: {queues - routed}"
        elif program == "python":
            assert words[1] == "manage.py"
            assert words[2] in get_commands(), f"{name}: no management command {words[2]!r}"
        else:
            pytest.fail(f"{name}: unknown program {program!r}")


@pytest.mark.parametrize("name", APP_SERVICES)
def test_every_environment_variable_is_one_the_settings_read(compose, name):
    known = variables_settings_read() | {"DJANGO_SETTINGS_MODULE"}
    unknown = set(compose["services"][name]["environment"]) - known
    assert not unknown, f"{name} sets variables the settings never read: {sorted(unknown)}"


def test_both_queues_have_a_consumer(compose):
    consumed = set()
    for name in ("worker", "gpu-worker"):
        words = commands_of(compose["services"][name])[0]
        consumed |= set(words[words.index("-Q") + 1].split(","))
    assert consumed == {"default", "similarity"}


def test_the_gpu_worker_reserves_one_gpu_and_mounts_the_weights_it_is_told_to_activate(compose):
    service = compose["services"]["gpu-worker"]
    (device,) = service["deploy"]["resources"]["reservations"]["devices"]
    assert (device["driver"], device["count"], device["capabilities"]) == ("nvidia", 1, ["gpu"])
    # The weights, read-only, at the folder the file's activation command names, from a required DINOV3_DIR.
    activation = re.search(r"check_dinov3 --activate (\S+) --device cuda", (ROOT / "docker-compose.yml").read_text())
    assert activation, "docker-compose.yml must say how to activate the model on the gpu-worker"
    (weights,) = [volume for volume in service["volumes"] if volume.endswith(f":{activation[1]}:ro")]
    assert weights.startswith("${DINOV3_DIR:?")
    assert service["environment"]["DINOV3_DEVICE"] == "cuda"  # bf16, as the activation with --device cuda
    assert service["build"]["args"]["REQUIREMENTS"] == "requirements-gpu.txt"
    assert (ROOT / "requirements-gpu.txt").exists()


def test_production_services_run_with_debug_off_and_a_required_secret(compose):
    for name in APP_SERVICES:
        environment = compose["services"][name]["environment"]
        assert environment["DEBUG"] == "false"
        assert ":?" in environment["SECRET_KEY"], "SECRET_KEY must be required, not defaulted"


def test_settings_refuse_to_start_with_debug_off_and_no_secret_key():
    env = {key: value for key, value in os.environ.items() if key != "SECRET_KEY"}
    env.update(DEBUG="false", DJANGO_SETTINGS_MODULE="subtlebench.settings")
    result = run_django("import django; django.setup()", env)
    assert result.returncode != 0
    assert "SECRET_KEY is not set" in result.stderr


@pytest.mark.parametrize("name", [name for name in APP_SERVICES if name != "gpu-worker"])
def test_only_the_gpu_worker_sees_the_weights_and_the_dinov3_settings(compose, name):
    """The current model is a database row: web, worker and beat read its fingerprint, never the weights."""
    service = compose["services"][name]
    assert not [key for key in service["environment"] if key.startswith("DINOV3_")], name
    volumes = service.get("volumes", [])
    assert not [volume for volume in volumes if "DINOV3" in volume or ":/models" in volume], name


def test_production_settings_install_no_demo_app_and_import_no_development_tooling():
    """With DEBUG off there is no `seed_demo` (demo users with a known password) and the embedded services,
    the dev server and the demo data are never imported by a full start-up (URLs, admin, Celery tasks)."""
    env = {**os.environ, "DEBUG": "false", "SECRET_KEY": "x" * 50, "DJANGO_SETTINGS_MODULE": "subtlebench.settings"}
    code = (
        "import sys, django; django.setup();"
        "from django.apps import apps; from django.urls import get_resolver; get_resolver().url_patterns;"
        "from subtlebench.celery import app; app.loader.import_default_modules();"
        "print(apps.is_installed('demo'), sorted(m for m in sys.modules if m.split('.')[0] in ('demo', 'devtools')))"
    )
    # A fresh interpreter: it shows what the start-up itself imports.
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False []"
    debug = run_django(
        "import django; django.setup(); from django.apps import apps; print(apps.is_installed('demo'))",
        {**env, "DEBUG": "true"},
    )
    assert debug.stdout.strip() == "True", debug.stderr


def test_it_reads_csrf_trusted_origins_as_urls_separated_by_commas():
    """The origins behind a TLS proxy are https:// URLs: splitting them on ':' made every value invalid."""
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="subtlebench.settings", DEBUG="false", SECRET_KEY="x" * 50)
    env["CSRF_TRUSTED_ORIGINS"] = "https://studio.example.org, https://studio.example.org:8443"
    script = (
        "import django; django.setup()\n"
        "from django.conf import settings; from django.core.management import call_command\n"
        "print(settings.CSRF_TRUSTED_ORIGINS); call_command('check')"
    )
    result = run_django(script, env)
    assert result.returncode == 0, result.stderr
    assert "['https://studio.example.org', 'https://studio.example.org:8443']" in result.stdout


def test_page_started_exports_land_on_a_volume_web_and_worker_share(compose):
    """The worker writes an export (and its zip) under EXPORT_ROOT; web serves the zip from there."""
    mounts = []
    for name in ("web", "worker"):
        service = compose["services"][name]
        export_root = service["environment"]["EXPORT_ROOT"]
        (volume,) = [v.split(":")[0] for v in service["volumes"] if v.split(":")[1] == export_root]
        mounts.append((volume, export_root))
    assert mounts[0] == mounts[1]
    assert mounts[0][0] in compose["volumes"], "a named volume, not a folder inside one container"
    # The app runs as the user `app`: a fresh named volume takes the owner of the image's folder.
    dockerfile = (ROOT / "Dockerfile").read_text().splitlines()
    owned = [line.split("chown app", 1)[1].split() for line in dockerfile if "chown app" in line]
    assert any(mounts[0][1] in folders for folders in owned), "the export folder must belong to the user app"


def two_host_overrides() -> list[dict]:
    """The compose overrides of docs/operations.md's "Two hosts": host A's, then host B's."""
    section = (ROOT / "docs" / "operations.md").read_text().split("### Two hosts", 1)[1]
    return [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", section, re.S)]


def test_the_documented_second_host_runs_a_worker_on_the_first_hosts_servers_and_mounts_none_of_its_folders(compose):
    host_a, host_b = two_host_overrides()
    published = {}
    for name, service in host_a["services"].items():
        (port,) = service["ports"]
        address, _, inside = port.rpartition(":")
        assert name in compose["services"] and ipaddress.ip_address(address.split(":")[0]).is_private, port
        published[name] = (address.split(":")[0], inside)
    assert set(published) == {"postgres", "redis"}
    (worker,) = host_b["services"].values()
    assert set(host_b["services"]) == {"worker"} and "volumes" not in worker  # its own volumes, nothing of host A's
    environment = worker["environment"]
    assert set(environment) <= variables_settings_read()
    assert environment["DATABASE_URL"].startswith("postgresql://subtlebench:${POSTGRES_PASSWORD:?")
    database = urlparse(re.sub(r"\$\{[^}]*\}", "password", environment["DATABASE_URL"]))
    broker = urlparse(environment["CELERY_BROKER_URL"])
    assert (database.hostname, str(database.port)) == published["postgres"]
    assert (broker.hostname, str(broker.port)) == published["redis"]


# --- A deployment that starts (issue 13) ---------------------------------------------------------------------


def production_env(**extra: str) -> dict:
    """The environment of a production process: DEBUG off, a real-looking secret, the databases named."""
    # Not the test process's own knobs: the TLS ones under test, nor the browser tests' DJANGO_ALLOW_ASYNC_UNSAFE.
    prefixes = ("SECURE_", "CSRF_", "ALLOWED_", "DJANGO_ALLOW_ASYNC_UNSAFE")
    env = {key: value for key, value in os.environ.items() if not key.startswith(prefixes)}
    env.update(
        DJANGO_SETTINGS_MODULE="subtlebench.settings",
        DEBUG="false",
        SECRET_KEY="k3y-" + "ab9Xz7Qw" * 8,
        DATABASE_URL=os.environ.get("DATABASE_URL") or "postgresql://subtlebench:pw@postgres:5432/subtlebench",
    )
    env.update(extra)
    return env


def documented_tls_settings() -> dict[str, str]:
    """The production settings of docs/operations.md (the ```sh block under '## TLS'), as variables."""
    text = (ROOT / "docs" / "operations.md").read_text()
    block = re.search(r"## TLS\n.*?```sh\n(.*?)```", text, re.S)
    assert block, "docs/operations.md must show the production settings under ## TLS"
    variables = {}
    for line in block[1].splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, value = line.partition("=")
            variables[name] = value
    return variables


def run_django(script: str, env: dict) -> subprocess.CompletedProcess:
    """`python -c SCRIPT` with `env` as its whole environment (forked from a fork server, tests/worker_zygote.py)."""
    return python_run(["-c", script], cwd=ROOT, env=env)


def test_check_deploy_is_clean_with_the_documented_production_settings():
    documented = documented_tls_settings()
    assert documented["SECRET_KEY"].startswith("<")  # a placeholder: the test puts a real-looking one
    documented.pop("SECRET_KEY")
    assert {"SECURE_PROXY_SSL_HEADER", "SECURE_SSL_REDIRECT", "SECURE_HSTS_SECONDS"} <= set(documented)
    result = python_run(
        ["manage.py", "check", "--deploy", "--fail-level", "WARNING"], cwd=ROOT, env=production_env(**documented)
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout
    # And the documented values are the ones in force.
    shown = run_django(
        "import django; django.setup(); from django.conf import settings as s;"
        "print(s.SECURE_PROXY_SSL_HEADER, s.SECURE_SSL_REDIRECT, s.SECURE_HSTS_SECONDS,"
        " s.SECURE_HSTS_INCLUDE_SUBDOMAINS, s.SECURE_HSTS_PRELOAD, s.CSRF_TRUSTED_ORIGINS, s.ALLOWED_HOSTS)",
        production_env(**documented),
    )
    assert shown.stdout.split("\n")[0] == (
        "('HTTP_X_FORWARDED_PROTO', 'https') True 31536000 True True ['https://studio.example.org'] "
        "['studio.example.org']"
    ), shown.stderr


def test_check_deploy_warns_without_the_tls_settings():
    """The test above is not clean by accident: without HSTS and the redirect, check --deploy says so."""
    result = python_run(
        ["manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=production_env(ALLOWED_HOSTS="studio.example.org"),
    )
    assert result.returncode != 0
    assert "security.W004" in result.stderr + result.stdout  # HSTS
    assert "security.W008" in result.stderr + result.stdout  # SSL redirect


def test_list_settings_are_comma_separated_and_take_https_origins_and_ipv6_hosts():
    env = production_env(
        ALLOWED_HOSTS="studio.example.org, [::1],localhost",
        CSRF_TRUSTED_ORIGINS="https://studio.example.org,https://studio.internal:8443",
    )
    result = run_django(
        "import django; django.setup()\n"
        "from django.conf import settings; from django.core.management import call_command\n"
        "print(settings.ALLOWED_HOSTS, settings.CSRF_TRUSTED_ORIGINS); call_command('check')",
        env,
    )
    assert result.returncode == 0, result.stderr
    assert (
        "['studio.example.org', '[::1]', 'localhost'] ['https://studio.example.org', 'https://studio.internal:8443']"
        in result.stdout
    )


@pytest.mark.parametrize("missing", ["SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL"])
def test_settings_refuse_to_start_in_production_without_a_required_secret(missing):
    env = production_env()
    env.pop(missing)
    result = run_django("import django; django.setup()", env)
    assert result.returncode != 0
    assert f"{missing} is not set" in result.stderr


def test_the_database_password_is_required_not_defaulted(compose):
    text = (ROOT / "docker-compose.yml").read_text()
    assert "POSTGRES_PASSWORD:-" not in text, "no default database password"
    assert compose["services"]["postgres"]["environment"]["POSTGRES_PASSWORD"].startswith("${POSTGRES_PASSWORD:?")
    for name in APP_SERVICES:
        assert "${POSTGRES_PASSWORD:?" in compose["services"][name]["environment"]["DATABASE_URL"]


@pytest.mark.parametrize("name", APP_SERVICES)
def test_the_tls_proxy_settings_reach_every_app_service(compose, name):
    environment = compose["services"][name]["environment"]
    for variable in ("SECURE_PROXY_SSL_HEADER", "SECURE_SSL_REDIRECT", "SECURE_HSTS_SECONDS", "PROXY_COUNT"):
        assert variable in environment, f"{name} does not pass {variable}"


def dockerignore_excludes(pattern_list: list[str], path: str) -> bool:
    """Docker's rule, enough for these patterns: a path is left out when it or a folder above it matches."""
    import fnmatch

    parts = path.split("/")
    excluded = False
    for pattern in pattern_list:
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").strip("/")
        for depth in range(1, len(parts) + 1):
            prefix = "/".join(parts[:depth])
            if fnmatch.fnmatch(prefix, pattern) or fnmatch.fnmatch(prefix, pattern.replace("**/", "")):
                excluded = not negate
                break
    return excluded


def test_the_image_leaves_out_data_virtualenvs_and_git():
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for path in (
        ".git/HEAD",
        ".venv/bin/python",
        "var/postgres/PG_VERSION",
        "var/media/frames/a.jpg",
        "var/exports/v1/data.json",
        "media/frames/a.jpg",
        "exports/v1/data.json",
        "imports/clip.mp4",
        ".env",
        "annotator/__pycache__/x.pyc",
    ):
        assert dockerignore_excludes(patterns, path), f"{path} would be copied into the image"
    for path in ("manage.py", "subtlebench/settings.py", "static/js/participant.js", "templates/base.html"):
        assert not dockerignore_excludes(patterns, path), f"{path} is needed in the image"


def test_the_content_security_policy_allows_the_media_bucket_and_nothing_else_by_default():
    script = (
        "import django; django.setup(); from django.conf import settings;"
        "print(settings.CONTENT_SECURITY_POLICY['DIRECTIVES']['img-src'])"
    )
    plain = run_django(script, production_env())
    assert plain.stdout.strip() == "[\"'self'\", 'data:', 'blob:']", plain.stderr
    s3 = run_django(script, production_env(S3_BUCKET="media", S3_ENDPOINT_URL="https://minio.example.org:9000/"))
    assert "'https://minio.example.org:9000'" in s3.stdout, s3.stderr
    # Media on a disk, source videos imported from a bucket: the workbench plays them from presigned URLs there.
    script = script.replace("'img-src'", "'media-src'")
    videos = run_django(script, production_env(S3_ENDPOINT_URL="https://minio.example.org:9000/"))
    assert "'https://minio.example.org:9000'" in videos.stdout, videos.stderr


@pytest.mark.parametrize("name", ("postgres", "redis", *APP_SERVICES))
def test_every_long_running_service_is_restarted_when_it_dies(compose, name):
    # A worker that dies (an out-of-memory kill, a bug) comes back without anyone there; `docker compose stop`
    # still stops it for good.
    assert compose["services"][name].get("restart") in ("always", "unless-stopped")


def test_workers_wait_for_the_broker_instead_of_exiting():
    from django.conf import settings

    # A worker started before Redis, or one that lost it, keeps retrying rather than exiting.
    assert settings.CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP is True
    assert settings.CELERY_BROKER_CONNECTION_MAX_RETRIES is None
    assert settings.CELERY_BROKER_TRANSPORT == "subtlebench.celery:RedisTransport"


def test_the_vllm_profile_is_optional_serves_an_openai_api_on_a_gpu_and_downloads_nothing(compose):
    vllm = compose["services"]["vllm"]
    assert vllm["profiles"] == ["vllm"]  # `docker compose up` without --profile vllm leaves it out
    assert vllm["image"].startswith("vllm/vllm-openai:") and not vllm["image"].endswith(":latest")
    assert vllm["deploy"]["resources"]["reservations"]["devices"][0]["capabilities"] == ["gpu"]
    assert vllm["environment"]["HF_HUB_OFFLINE"] == "1"
    assert any(volume.endswith(":/models:ro") for volume in vllm["volumes"])
    assert "--served-model-name" in vllm["command"] and '{"image": 2}' in vllm["command"]
    for name in APP_SERVICES:
        assert "profiles" not in compose["services"][name]
