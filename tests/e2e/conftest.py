"""The e2e stack: deployed once per session with `pdfbatch stack up`, shared by every e2e test."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest
import redis

from fixtures.openapi import CheckedApiClient
from fixtures.stack import DB, REDIS_URL, cli_env, run_cli


@pytest.fixture(scope="session")
def stack(localstack: str) -> Iterator[dict[str, Any]]:
    """The e2e stack deployed to LocalStack (fresh database and Redis db)."""
    conn = pymysql.connect(host="127.0.0.1", user="root", autocommit=True)
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{DB}`")
    conn.close()
    redis.Redis.from_url(REDIS_URL).flushdb()
    env = cli_env(localstack)
    # `pdfbatch stack up` is what operators run: it prepares MySQL and deploys (LocalStack already runs).
    done = run_cli(env, "stack", "up", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    outputs = json.loads(done.stdout)
    conn = pymysql.connect(host="127.0.0.1", user="root", database=DB, autocommit=True, charset="utf8mb4")
    yield {
        "outputs": outputs,
        "env": env,
        "db": conn,
        "endpoint": localstack,
        # Finds the key `stack up` stored; holds every answer to the OpenAPI document the API serves.
        "api": CheckedApiClient(outputs["LocalApiUrl"]),
    }
    conn.close()
