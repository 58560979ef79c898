"""A full disk under a served control plane on SQLite (a file-size limit on the server process,
which is what a full disk looks like to SQLite: a write that fails): changes are refused with
503 `storage_unavailable` and a sentence, never 500; reads keep working; once space is back
the same change succeeds."""

from __future__ import annotations

import resource
from pathlib import Path

import httpx
import pytest

from conftest import LiveServer, Tenant, settings_env, start_live_server, stop_live_server
from support.waiting import wait_until


@pytest.fixture
def sqlite_server(tmp_path: Path, tenant: Tenant, database_url: str) -> LiveServer:  # type: ignore[misc]
    if not database_url.startswith("sqlite"):
        pytest.skip("the file-size limit stands for a full disk under SQLite's files")
    served = start_live_server(
        settings_env(database_url, tmp_path / "data", FIRSTLUME_SCHEDULER="off"), tmp_path / "server.log"
    )
    yield served  # type: ignore[misc]
    stop_live_server(served)


def test_a_full_disk_answers_503_and_recovers(
    sqlite_server: LiveServer, tenant: Tenant, database_url: str
) -> None:
    server = sqlite_server
    db_file = Path(database_url.split("///", 1)[1])
    http = httpx.Client(base_url=f"{server.url}/api/v1/orgs/{tenant.org}", headers=tenant.headers, timeout=30)
    assert http.put("/variables/warmup", json={"value": "x"}).status_code in (200, 201)
    files = [p for p in db_file.parent.glob(db_file.name + "*")] + [server.log_path]
    limit = max(p.stat().st_size for p in files) + 64 * 1024
    # The soft limit only: raising it again later needs no privilege.
    resource.prlimit(server.process.pid, resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
    answers: list[httpx.Response] = []
    for i in range(400):
        response = http.put(f"/variables/v{i}", json={"value": "y" * 4000})
        answers.append(response)
        if response.status_code == 503:
            break
    statuses = [r.status_code for r in answers]
    assert 500 not in statuses, statuses
    full = answers[-1]
    assert full.status_code == 503, statuses
    error = full.json()["error"]
    assert error["code"] == "storage_unavailable" and "disk" in error["message"], error
    # Reads still work while the disk is full.
    assert http.get("/variables").status_code == 200

    resource.prlimit(
        server.process.pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
    )
    again = wait_until(
        lambda: (r := http.put("/variables/after", json={"value": "z"})).status_code in (200, 201) and r,
        30,
        "a change to succeed once space is back",
    )
    assert again.status_code in (200, 201)
    names = {v["name"] for v in http.get("/variables").json()["variables"]}
    assert "after" in names
    http.close()
