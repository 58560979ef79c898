"""The `firstlume` command: serve | executor | migrate | org | token | keygen | demo | export-schema |
settings-docs."""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from firstlume.settings import Settings

T = TypeVar("T")
# Allocations between young-generation collections (the default is 700): see cmd_serve.
GC_THRESHOLD = 100_000


def _with_context(settings: Settings, work: Callable[[Any], Awaitable[T]]) -> T:
    from firstlume.db.engine import Database
    from firstlume.domain.audit import AuditVia
    from firstlume.keys import load_keyring
    from firstlume.pubsub import PubSub
    from firstlume.services.audit import entered_via
    from firstlume.services.context import Context

    async def main() -> T:
        entered_via(AuditVia.CLI)
        db = Database(settings.database_url)
        try:
            ctx = Context(
                settings=settings, db=db, keyring=load_keyring(settings), pubsub=PubSub("memory://")
            )
            return await work(ctx)
        finally:
            await db.dispose()

    return asyncio.run(main())


def cmd_migrate(settings: Settings, args: argparse.Namespace) -> int:
    from firstlume.db.migrate import upgrade

    upgrade(settings.database_url)
    print("database is at the current schema", file=sys.stderr)
    return 0


def collect_as_served() -> None:
    """The garbage collector's settings of a serving process. A large GraphQL response (or a
    parsed plan) allocates hundreds of thousands of short-lived objects; with the default
    thresholds the collector then runs so often that it costs more than the work (measured: 34 s
    instead of 6 s for the most expensive allowed query; `json.loads` of a 16 MB plan 0.30 s
    instead of 0.12 s) and blocks the event loop. What start-up built lives for ever: frozen out
    of every collection. Benchmarks measure their floors under the same settings."""
    gc.freeze()
    gc.set_threshold(GC_THRESHOLD, 50, 100)


def cmd_serve(settings: Settings, args: argparse.Namespace) -> int:
    import uvicorn

    from firstlume.app import create_app
    from firstlume.keys import load_keyring

    cert = args.tls_cert or settings.tls_cert
    key = args.tls_key or settings.tls_key
    if args.tls_local:
        # `make run TLS=1`: a local CA and certificate under the data dir, which local executors
        # trust through SSL_CERT_FILE (a bundle with the public authorities: clones still work).
        from firstlume.local_tls import ensure_local_tls

        local = ensure_local_tls(settings.data_dir / "tls")
        cert, key = local.cert, local.key
        os.environ["SSL_CERT_FILE"] = str(local.bundle)
    if (cert is None) != (key is None):
        print(
            "firstlume serve: HTTPS needs both --tls-cert and --tls-key (FIRSTLUME_TLS_CERT, FIRSTLUME_TLS_KEY)"
        )
        return 2
    if "public_url" not in settings.model_fields_set:
        # Local executors reach the control plane where it listens.
        host = "127.0.0.1" if args.host in ("0.0.0.0", "::", "") else args.host
        scheme = "https" if cert else "http"
        settings = settings.model_copy(update={"public_url": f"{scheme}://{host}:{args.port}"})
    from firstlume.logs import configure

    configure(settings.log_format, args.log_level)
    # The keys are loaded when the app starts; a missing or bad key stops `serve` here, with
    # the message and exit code of a bad setting, rather than in the server's start-up.
    load_keyring(settings)
    app = create_app(settings)
    collect_as_served()
    # log_config=None: uvicorn's loggers propagate to the root handler configured just above.
    # No permessage-deflate: its zlib state is ~40 KB per WebSocket, more than half of an idle
    # watcher's memory (measured: 73 KB -> 32 KB per connection), for small JSON messages.
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        log_config=None,
        ws="websockets-sansio",
        ws_per_message_deflate=False,
        ssl_certfile=str(cert) if cert else None,
        ssl_keyfile=str(key) if key else None,
    )
    return 0


def cmd_executor(args: argparse.Namespace) -> int:
    # The executor reads its own environment (docs/executor-protocol.md) and loads nothing of the
    # control plane, settings included: its start-up is on every run's critical path.
    from firstlume.executor.main import run_from_env, run_when_told

    return run_when_told() if args.spare else run_from_env()


def cmd_org_create(settings: Settings, args: argparse.Namespace) -> int:
    from firstlume.services import accounts

    async def work(ctx: Any) -> None:
        async with ctx.unit() as unit:
            await accounts.create_org(unit.session, args.slug, args.name)

    _with_context(settings, work)
    print(f"organization {args.slug} created", file=sys.stderr)
    return 0


def cmd_token_create(settings: Settings, args: argparse.Namespace) -> int:
    from firstlume.db.types import utcnow
    from firstlume.domain.errors import InvalidRequest
    from firstlume.services import accounts
    from firstlume.services.access.commands import parse_duration
    from firstlume.services.access.roles import parse_role

    role = parse_role(args.role, "--role") if args.role else None
    try:
        expires_at = utcnow() + parse_duration(args.expires_in) if args.expires_in else None
    except ValueError as error:
        raise InvalidRequest(f"--expires-in: {error}") from None

    async def work(ctx: Any) -> str:
        async with ctx.unit() as unit:
            return await accounts.create_token(
                unit.session, args.org, args.user, name=args.name or "", role=role, expires_at=expires_at
            )

    # Only the token on stdout (for $(...)); it is shown this once.
    print(_with_context(settings, work))
    return 0


def cmd_token_revoke(settings: Settings, args: argparse.Namespace) -> int:
    from firstlume.services.access import tokens

    async def work(ctx: Any) -> str:
        async with ctx.unit() as unit:
            return await tokens.revoke_by_admin(unit.session, args.id, args.token)

    print(f"token {_with_context(settings, work)} revoked", file=sys.stderr)
    return 0


def cmd_keygen(settings: Settings, args: argparse.Namespace) -> int:
    from firstlume.crypto import generate_key

    print(generate_key())
    return 0


def cmd_demo(settings: Settings, args: argparse.Namespace) -> int:
    from firstlume.demo import seed_demo

    demo = _with_context(settings, seed_demo)
    base = f"http://{args.host}:{args.port}"
    if args.tls:
        from firstlume.local_tls import ensure_local_tls

        local = ensure_local_tls(settings.data_dir / "tls")
        # The Terraform CLI needs a DNS name for its cloud hostname: localhost, with the port.
        base = f"https://localhost:{args.port}"
        print(f"export SSL_CERT_FILE={local.bundle}")
        print(f"export FIRSTLUME_HOST=localhost:{args.port}")
    print(f"export FIRSTLUME_TOKEN={demo.token}")
    print('export H="Authorization: Bearer $FIRSTLUME_TOKEN"')
    print(f"export O={base}/api/v1/orgs/{demo.org}")
    print(f"export ST={demo.stack}")
    return 0


def cmd_export_graphql(settings: Settings, args: argparse.Namespace) -> int:
    from firstlume.api.graphql.schema import schema

    text = schema.as_str() + "\n"
    if args.output == "-":
        sys.stdout.write(text)
    else:
        with open(args.output, "w") as handle:
            handle.write(text)
    return 0


def cmd_settings_docs(settings: Settings, args: argparse.Namespace) -> int:
    from pathlib import Path

    from firstlume import settings_docs

    if args.write:
        try:
            changed = settings_docs.write(Path(args.write))
        except (OSError, ValueError) as error:
            print(f"firstlume: {error}", file=sys.stderr)
            return 1
        print(f"{args.write}: {'updated' if changed else 'already current'}", file=sys.stderr)
        return 0
    for table in settings_docs.TABLES:
        print(settings_docs.render(table), end="\n\n")
    return 0


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("firstlume")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="firstlume", description=__doc__)
    parser.add_argument("--version", action="version", version=f"firstlume {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the control plane (API, UI and scheduler)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--log-level", default="info")
    serve.add_argument(
        "--tls-cert", type=Path, help="serve HTTPS with this PEM certificate (FIRSTLUME_TLS_CERT)"
    )
    serve.add_argument("--tls-key", type=Path, help="the certificate's PEM private key (FIRSTLUME_TLS_KEY)")
    serve.add_argument(
        "--tls-local",
        action="store_true",
        help="serve HTTPS with a local CA made under the data dir (make run TLS=1)",
    )
    serve.set_defaults(handler=cmd_serve)

    executor = sub.add_parser("executor", help="run one phase of a run (configured by environment)")
    executor.add_argument(
        "--spare",
        action="store_true",
        help="start ahead of need; read the environment from stdin (one JSON line)",
    )
    executor.set_defaults(handler=None, standalone=cmd_executor)
    sub.add_parser("migrate", help="upgrade the database to the current schema").set_defaults(
        handler=cmd_migrate
    )
    sub.add_parser("keygen", help="print a new encryption key for FIRSTLUME_ENCRYPTION_KEYS").set_defaults(
        handler=cmd_keygen
    )

    org = sub.add_parser("org", help="organizations").add_subparsers(dest="org_command", required=True)
    org_create = org.add_parser("create", help="create an organization")
    org_create.add_argument("slug")
    org_create.add_argument("--name")
    org_create.set_defaults(handler=cmd_org_create)

    token = sub.add_parser("token", help="API tokens").add_subparsers(dest="token_command", required=True)
    token_create = token.add_parser("create", help="create a token (and the user and membership if needed)")
    token_create.add_argument("--org", required=True)
    token_create.add_argument("--user", required=True)
    token_create.add_argument("--name")
    token_create.add_argument(
        "--role",
        help="reader, operator or admin (default: admin for an organization's first member, else reader; an existing member keeps theirs)",
    )
    token_create.add_argument(
        "--expires-in", help='how long the token lives, such as "30d", "12h" (default: no expiry)'
    )
    token_create.set_defaults(handler=cmd_token_create)
    token_revoke = token.add_parser("revoke", help="revoke a token by its id, or by the token itself")
    token_revoke.add_argument("id", nargs="?")
    token_revoke.add_argument("--token", help="the token itself (read from here rather than by id)")
    token_revoke.set_defaults(handler=cmd_token_revoke)

    demo = sub.add_parser("demo", help="seed the demo organization and stack; print the exports")
    demo.add_argument("--host", default="127.0.0.1")
    demo.add_argument("--port", type=int, default=8000)
    demo.add_argument("--tls", action="store_true", help="also print SSL_CERT_FILE for `serve --tls-local`")
    demo.set_defaults(handler=cmd_demo)

    schema = sub.add_parser("export-schema", help="write the GraphQL schema (SDL)")
    schema.add_argument("output", nargs="?", default="schema.graphql")
    schema.set_defaults(handler=cmd_export_graphql)

    docs = sub.add_parser("settings-docs", help="print the README's tables of FIRSTLUME_* settings")
    docs.add_argument("--write", metavar="README", help="replace the tables in this file instead")
    docs.set_defaults(handler=cmd_settings_docs)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "standalone", None) is not None:
        return int(args.standalone(args) or 0)
    from firstlume.crypto import KeyRingError
    from firstlume.settings import Settings, SettingsError

    try:
        settings = Settings.from_env()
    except SettingsError as error:
        print(f"firstlume: {error}", file=sys.stderr)
        return 2
    from firstlume.domain.errors import FirstlumeError

    try:
        return int(args.handler(settings, args) or 0)
    except KeyRingError as error:
        # Configuration too (FIRSTLUME_ENCRYPTION_KEYS missing or malformed), found when a
        # command first needs the keys: the same message and exit code as a bad setting.
        print(f"firstlume: {error}", file=sys.stderr)
        return 2
    except FirstlumeError as error:
        print(f"firstlume: {error.message}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
