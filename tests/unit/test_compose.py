"""docker-compose.localstack.yml cannot run here (no Docker engine): check what makes it work elsewhere."""

from __future__ import annotations

from pathlib import Path

import yaml

COMPOSE = Path(__file__).resolve().parents[2] / "docker-compose.localstack.yml"


def test_lambda_containers_join_the_network_where_mysql_and_redis_resolve() -> None:
    # GIVEN the compose file
    doc = yaml.safe_load(COMPOSE.read_text())
    services = doc["services"]
    network = doc["networks"]["pdfbatch"]["name"]
    # THEN LocalStack puts Lambda containers on the network that MySQL and Redis are on
    assert services["localstack"]["environment"]["LAMBDA_DOCKER_NETWORK"] == network
    for name in ("localstack", "mysql", "redis"):
        assert "pdfbatch" in services[name]["networks"], name
    # and LocalStack can start Lambda containers (the Docker socket) with the services pdfbatch uses
    assert "/var/run/docker.sock:/var/run/docker.sock" in services["localstack"]["volumes"]
    wanted = {"s3", "sqs", "lambda", "apigateway", "iam", "sts", "logs", "cloudformation", "events"}
    assert wanted <= set(services["localstack"]["environment"]["SERVICES"].split(","))


def test_ports_are_published_on_loopback_only_at_the_cli_defaults() -> None:
    doc = yaml.safe_load(COMPOSE.read_text())
    ports = {name: svc["ports"] for name, svc in doc["services"].items()}
    assert ports == {
        "localstack": ["127.0.0.1:4566:4566"],
        "mysql": ["127.0.0.1:3306:3306"],
        "redis": ["127.0.0.1:6379:6379"],
    }
    assert doc["services"]["mysql"]["environment"]["MARIADB_DATABASE"] == "pdfbatch"
