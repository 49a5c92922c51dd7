"""compose.yaml, read as Compose reads it: the scaled-out shape (PostgreSQL, Redis, the bot,
two worker hosts, the gateway) from the one image, with what a worker needs to stop well.
(.ci/image also has podman-compose render it.)"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WARROOM_SERVICES = ("serve", "worker-1", "worker-2", "gateway")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded = yaml.safe_load((ROOT / "compose.yaml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def seconds(duration: str) -> int:
    """A Compose duration (``11m``, ``660s``, ``1m30s``) in seconds."""
    parts = re.fullmatch(r"(?:(\d+)m)?(?:(\d+)s)?", duration)
    assert duration
    assert parts is not None, duration
    return int(parts.group(1) or 0) * 60 + int(parts.group(2) or 0)


def test_the_shape_has_the_database_redis_the_bot_two_workers_and_the_gateway(
    compose: dict[str, Any],
) -> None:
    assert set(compose["services"]) == {"postgres", "redis", *WARROOM_SERVICES}
    commands = {name: compose["services"][name]["command"] for name in WARROOM_SERVICES}
    assert commands["serve"] == ["warroom", "serve"]
    assert commands["worker-1"][:2] == commands["worker-2"][:2] == ["warroom", "worker"]
    assert commands["gateway"] == ["warroom", "gateway"]


@pytest.mark.parametrize("name", WARROOM_SERVICES)
def test_each_warroom_service_runs_the_dockerfiles_image_against_healthy_stores(
    compose: dict[str, Any], name: str
) -> None:
    service = compose["services"][name]
    assert service["build"]["context"] == "."
    assert service["depends_on"] == {
        "postgres": {"condition": "service_healthy"},
        "redis": {"condition": "service_healthy"},
    }
    environment = service["environment"]
    assert environment["DATABASE_URL"].startswith("postgresql://")
    assert environment["DATABASE_URL"].endswith("@postgres:5432/warroom")
    assert environment["REDIS_URL"] == "redis://redis:6379/0"
    # A worker finishes its step on stop: a Bash call may take 10 minutes (README).
    assert seconds(service["stop_grace_period"]) >= 660
    # Local sandboxes are bubblewrap jails: user namespaces inside the container, with a
    # hostname of their own (seccomp) and a proc of their own, which the kernel refuses
    # while parts of the container's /proc are masked (systempaths; seen in .ci/image).
    assert set(service["security_opt"]) == {
        "seccomp=unconfined",
        "apparmor=unconfined",
        "systempaths=unconfined",
    }


def test_each_host_keeps_its_own_data_and_the_stores_are_checked_for_health(
    compose: dict[str, Any],
) -> None:
    services = compose["services"]
    volumes = [services[name]["volumes"][0].split(":")[0] for name in WARROOM_SERVICES]
    assert len(set(volumes)) == len(volumes), "two services would share one data directory"
    assert all(v in compose["volumes"] for v in volumes)
    assert services["worker-1"]["hostname"] != services["worker-2"]["hostname"]
    for store in ("postgres", "redis"):
        assert services[store]["healthcheck"]["test"][0] == "CMD"
    assert services["gateway"]["environment"]["WARROOM_GATEWAY_LISTEN"] == "0.0.0.0:3128"
