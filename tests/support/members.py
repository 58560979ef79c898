"""Members of a test's organization, made as an admin makes them (PUT /members/<email>), each
with an API token of their own."""

from __future__ import annotations

import httpx

from firstlume.services import accounts
from firstlume.services.context import Context


async def add_member(
    client: httpx.AsyncClient,
    ctx: Context,
    admin: dict[str, str],
    org: str,
    email: str,
    role: str,
    groups: list[str],
) -> dict[str, str]:
    """Makes `email` a member with `role` and `groups`; returns the headers of a token of theirs."""
    put = await client.put(
        f"/api/v1/orgs/{org}/members/{email}", headers=admin, json={"role": role, "groups": groups}
    )
    assert put.status_code == 200, put.text
    async with ctx.unit() as unit:
        token = await accounts.create_token(unit.session, org, email)
    return {"Authorization": f"Bearer {token}"}


async def grant_folder(
    client: httpx.AsyncClient, admin: dict[str, str], org: str, folder: str, grants: dict[str, str]
) -> None:
    granted = await client.put(
        f"/api/v1/orgs/{org}/folders/{folder}/grants", headers=admin, json={"grants": grants}
    )
    assert granted.status_code == 200, granted.text
