"""Hostile and broken input to the HCP Terraform API the CLI uses: tarballs that escape their
directory, links out, too many files, a huge declared size, a body that is not gzip; unknown and
other organizations' ids. Each gets a clear 4xx, never a 500, and nothing is stored."""

from __future__ import annotations

import io
import json
import tarfile
from typing import Any

import httpx
import pytest

from conftest import Tenant, make_tenant
from firstlume.domain.tarballs import MAX_FILES, extract_tarball
from firstlume.services.context import Context

V2 = "/api/v2"


def tarball(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for info, data in members:
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def file(name: str, data: bytes = b"x") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def link(name: str, target: str, *, hard: bool = False) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = tarfile.LNKTYPE if hard else tarfile.SYMTYPE
    info.linkname = target
    return info, None


GOOD = tarball([file("main.tf", b'resource "terraform_data" "a" {}\n')])


def declared_huge() -> bytes:
    """A tar header that declares a 1 GB file (its content is not there)."""
    info = tarfile.TarInfo("big.bin")
    info.size = 1024**3
    raw = io.BytesIO()
    raw.write(info.tobuf(format=tarfile.GNU_FORMAT))
    raw.write(b"\0" * 1024)
    import gzip

    return gzip.compress(raw.getvalue())


HOSTILE: dict[str, bytes] = {
    "dot-dot path": tarball([file("main.tf"), file("../escape.tf")]),
    "absolute path": tarball([file("/etc/escape.tf")]),
    "symlink out": tarball([file("main.tf"), link("modules", "../../etc")]),
    "absolute symlink": tarball([link("passwd", "/etc/passwd")]),
    "hard link out": tarball([link("passwd", "../../etc/passwd", hard=True)]),
    "10,000 files": tarball([file(f"f{i}.tf") for i in range(10_000)]),
    "1 GB declared": declared_huge(),
    "not gzip": b"this is not a tarball at all",
    "gzip but not tar": __import__("gzip").compress(b"plain text, no tar headers" * 100),
}


class Cli:
    def __init__(self, client: httpx.AsyncClient, tenant: Tenant) -> None:
        self.client = client
        self.headers = {**tenant.headers, "Content-Type": "application/vnd.api+json"}
        self.org = tenant.org

    async def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        return await self.client.post(path, content=json.dumps(body), headers=self.headers)

    async def get(self, path: str) -> httpx.Response:
        return await self.client.get(path, headers=self.headers)

    async def workspace(self, name: str = "network") -> str:
        response = await self.post(
            f"{V2}/organizations/{self.org}/workspaces",
            {"data": {"type": "workspaces", "attributes": {"name": name}}},
        )
        assert response.status_code == 201, response.text
        return str(response.json()["data"]["id"])

    async def configuration_version(self, workspace: str) -> dict[str, Any]:
        response = await self.post(
            f"{V2}/workspaces/{workspace}/configuration-versions",
            {"data": {"type": "configuration-versions", "attributes": {"speculative": True}}},
        )
        assert response.status_code == 201, response.text
        return response.json()["data"]  # type: ignore[no-any-return]


@pytest.fixture
def cli(client: httpx.AsyncClient, tenant: Tenant) -> Cli:
    return Cli(client, tenant)


@pytest.mark.parametrize("case", sorted(HOSTILE))
async def test_a_hostile_tarball_is_refused_and_nothing_is_stored(cli: Cli, case: str) -> None:
    workspace = await cli.workspace()
    version = await cli.configuration_version(workspace)
    upload = version["attributes"]["upload-url"]
    path = "/" + upload.split("://", 1)[1].split("/", 1)[1]
    response = await cli.client.put(path, content=HOSTILE[case])
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_configuration"
    assert "Nothing was stored" in error["message"]
    read = await cli.get(f"{V2}/configuration-versions/{version['id']}")
    assert read.json()["data"]["attributes"]["status"] == "pending"
    # A run cannot start from it.
    run = await cli.post(
        f"{V2}/runs",
        {
            "data": {
                "attributes": {},
                "relationships": {
                    "workspace": {"data": {"type": "workspaces", "id": workspace}},
                    "configuration-version": {
                        "data": {"type": "configuration-versions", "id": version["id"]}
                    },
                },
            }
        },
    )
    assert run.status_code == 409, run.text
    # The same URL then takes a good upload.
    good = await cli.client.put(path, content=GOOD)
    assert good.status_code == 200, good.text


async def test_an_upload_url_with_a_wrong_secret_stores_nothing(cli: Cli) -> None:
    version = await cli.configuration_version(await cli.workspace())
    path = "/" + version["attributes"]["upload-url"].split("://", 1)[1].split("/", 1)[1]
    response = await cli.client.put(path.rsplit("/", 1)[0] + "/not-the-secret", content=GOOD)
    assert response.status_code == 404, response.text
    read = await cli.get(f"{V2}/configuration-versions/{version['id']}")
    assert read.json()["data"]["attributes"]["status"] == "pending"


async def test_unknown_ids_are_404_in_json_api_shape(cli: Cli) -> None:
    for path in (
        f"{V2}/workspaces/ws-doesnotexist",
        f"{V2}/runs/run-doesnotexist",
        f"{V2}/plans/plan-doesnotexist",
        f"{V2}/configuration-versions/cv-doesnotexist",
        f"{V2}/workspaces/not-a-workspace-id",
    ):
        response = await cli.get(path)
        assert response.status_code == 404, (path, response.text)
        assert response.json()["errors"][0]["status"] == "404"


async def test_another_organizations_things_are_404(
    cli: Cli, client: httpx.AsyncClient, ctx: Context
) -> None:
    workspace = await cli.workspace()
    version = await cli.configuration_version(workspace)
    other = Cli(client, await make_tenant(ctx, "other", "eve@example.com"))
    for path in (f"{V2}/workspaces/{workspace}", f"{V2}/configuration-versions/{version['id']}"):
        response = await other.get(path)
        assert response.status_code == 404, response.text
    created = await other.post(
        f"{V2}/workspaces/{workspace}/configuration-versions", {"data": {"attributes": {"speculative": True}}}
    )
    assert created.status_code == 404, created.text
    run = await other.post(
        f"{V2}/runs",
        {
            "data": {
                "relationships": {
                    "workspace": {"data": {"id": workspace}},
                    "configuration-version": {"data": {"id": version["id"]}},
                }
            }
        },
    )
    assert run.status_code == 404, run.text


async def test_broken_documents_are_422(cli: Cli) -> None:
    response = await cli.post(f"{V2}/runs", {"data": {"attributes": {}}})
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["detail"]
    response = await cli.post(
        f"{V2}/organizations/{cli.org}/workspaces", {"data": {"attributes": {"name": "../x"}}}
    )
    assert response.status_code == 422, response.text


def test_extraction_refuses_what_the_check_refuses(tmp_path: Any) -> None:
    from firstlume.domain.tarballs import UnsafeTarball

    for case, data in HOSTILE.items():
        target = tmp_path / case.replace(" ", "-").replace(",", "")
        target.mkdir()
        with pytest.raises(UnsafeTarball):
            extract_tarball(data, target)
        assert not (tmp_path / "escape.tf").exists()
    assert MAX_FILES < 10_000
    good = tmp_path / "good"
    good.mkdir()
    extract_tarball(tarball([file("main.tf"), file("modules/x/a.tf"), link("alias.tf", "main.tf")]), good)
    assert (good / "modules/x/a.tf").read_bytes() == b"x"
    assert (good / "alias.tf").is_symlink()


async def test_the_run_address_the_cli_prints_leads_to_the_runs_page(client: httpx.AsyncClient) -> None:
    response = await client.get("/app/acme/network/runs/run-0123abcd", follow_redirects=False)
    assert response.status_code == 302
    assert response.headers["location"] == "/orgs/acme/runs/0123abcd"


async def test_another_organizations_run_is_404_and_left_as_it_was(
    cli: Cli, client: httpx.AsyncClient, ctx: Context
) -> None:
    workspace = await cli.workspace()
    version = await cli.configuration_version(workspace)
    path = "/" + version["attributes"]["upload-url"].split("://", 1)[1].split("/", 1)[1]
    assert (await cli.client.put(path, content=GOOD)).status_code == 200
    started = await cli.post(
        f"{V2}/runs",
        {
            "data": {
                "relationships": {
                    "workspace": {"data": {"id": workspace}},
                    "configuration-version": {"data": {"id": version["id"]}},
                }
            }
        },
    )
    assert started.status_code == 201, started.text
    run_id = started.json()["data"]["id"]
    plain = run_id.removeprefix("run-")
    before = (await cli.get(f"{V2}/runs/{run_id}")).json()["data"]["attributes"]["status"]
    other = Cli(client, await make_tenant(ctx, "other", "eve@example.com"))
    for path in (f"{V2}/runs/{run_id}", f"{V2}/plans/plan-{plain}", f"{V2}/applies/apply-{plain}"):
        response = await other.get(path)
        assert response.status_code == 404, (path, response.text)
        assert response.json()["errors"][0]["detail"], response.text
    for action in ("apply", "discard", "cancel"):
        response = await other.post(f"{V2}/runs/{run_id}/actions/{action}", {})
        assert response.status_code == 404, (action, response.text)
    assert (await cli.get(f"{V2}/runs/{run_id}")).json()["data"]["attributes"]["status"] == before
