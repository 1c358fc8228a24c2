"""Start checks and timeouts: every database connection has a connect and a statement timeout, `/healthz` answers in
time whatever hangs, and a worker or the web on a database that does not answer refuses to start, naming the setting."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
import requests
from django.db import connection

from devtools.localservices import BASE_DIR, port_open
from subtlebench import settings as settings_module
from tests.conftest import database_url, free_port, refused_port


@pytest.mark.django_db
def test_it_sets_a_statement_timeout_on_every_connection():
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone() == ("5min",)
    assert connection.settings_dict["OPTIONS"]["connect_timeout"] == 5


def test_migrate_runs_without_the_statement_timeout_and_the_timeout_is_a_setting(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["manage.py", "migrate"])
    assert settings_module.statement_timeout_ms() == 0
    monkeypatch.setattr(sys, "argv", ["manage.py", "runserver"])
    monkeypatch.setenv("DB_STATEMENT_TIMEOUT_SECONDS", "1.5")
    assert settings_module.statement_timeout_ms() == 1500
    monkeypatch.setenv("DB_CONNECT_TIMEOUT_SECONDS", "2")
    options = settings_module.database_from_url("postgresql://u@db:5432/app")["OPTIONS"]
    assert options == {"connect_timeout": 2, "options": "-c statement_timeout=1500"}


def start_web(port: int, env: dict) -> subprocess.Popen:
    """The app under gunicorn, as deployed; returns once it listens."""
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "subtlebench.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", "1"],
        cwd=BASE_DIR,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not port_open(port):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError("gunicorn did not start")
        time.sleep(0.1)
    return process


def test_healthz_answers_503_in_time_while_postgresql_is_frozen(private_postgres):
    token = uuid.uuid4().hex
    port = free_port()
    env = {**os.environ, "DATABASE_URL": private_postgres.url, "HEALTHZ_TOKEN": token, "ALLOWED_HOSTS": "127.0.0.1"}
    web = start_web(port, env)
    url, headers = f"http://127.0.0.1:{port}/healthz", {"Authorization": f"Bearer {token}"}
    try:
        assert requests.get(url, headers=headers, timeout=30).status_code == 200
        # SIGSTOP: the server still accepts connections (the kernel queues them) but never answers, as a hung host
        # does. Without a bound, the check waited on it for as long as the client did.
        private_postgres.signal_all(signal.SIGSTOP)
        try:
            frozen = requests.get(url, headers=headers, timeout=5)
        finally:
            private_postgres.signal_all(signal.SIGCONT)
        assert frozen.status_code == 503
        assert frozen.json()["parts"]["database"] == {"status": "down", "detail": "no answer within 3 s"}
        assert frozen.json()["parts"]["broker"]["status"] == "ok"
        assert requests.get(url, headers=headers, timeout=30).status_code == 200
    finally:
        web.terminate()
        web.wait(timeout=30)


def test_the_web_on_a_database_port_that_refuses_exits_non_zero_naming_database_url():
    with refused_port() as port:
        wrong = database_url().replace(f":{connection.settings_dict['PORT']}/", f":{port}/")
        assert f":{port}/" in wrong
        # gunicorn as deployed, with two workers: the first that fails its start check halts them all.
        web = subprocess.run(
            [sys.executable, "-m", "gunicorn", "subtlebench.wsgi", "--bind", f"127.0.0.1:{free_port()}", "-w", "2"],
            cwd=BASE_DIR,
            env={**os.environ, "DATABASE_URL": wrong},
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert web.returncode != 0
    assert "the web refuses to start: database at " in web.stderr
    assert f":{port}/{connection.settings_dict['NAME']} (DATABASE_URL): unreachable" in web.stderr
    assert "Worker failed to boot" in web.stderr


@pytest.mark.e2e
def test_a_worker_on_a_database_port_that_refuses_exits_non_zero_naming_database_url(worker_fork_servers, tmp_path):
    log = tmp_path / "worker.log"
    with refused_port() as port:
        wrong = database_url().replace(f":{connection.settings_dict['PORT']}/", f":{port}/")
        assert f":{port}/" in wrong
        args = [
            "-A",
            "subtlebench",
            "worker",
            "-Q",
            "default",
            "--pool",
            "solo",
            "--without-mingle",
            "--without-gossip",
        ]
        worker = worker_fork_servers("plain").spawn(
            args, env={**os.environ, "DATABASE_URL": wrong}, cwd=BASE_DIR, log=log
        )
        returncode = worker.wait(timeout=60)
    output = log.read_text()
    assert returncode != 0
    assert "the worker refuses to start: database at " in output
    assert f":{port}/{connection.settings_dict['NAME']} (DATABASE_URL): unreachable" in output
    assert " ready." not in output
