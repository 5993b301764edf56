"""`labkit serve`: run the server over stdio (the default) or Streamable HTTP.

Owns: the command's options, choosing the deployment (a config file, or the demo), the order
of start-up (configuration, stores, listening socket, sandbox, then serving), signal handling
and exit codes: 0 after a clean stop (EOF, SIGINT, SIGTERM), 1 when the environment refuses
(port in use, a store that cannot be opened, sandbox required but unavailable), 2 for a bad
configuration or usage, with one line on stderr naming the problem.

Heavy imports (uvicorn, starlette) happen in `run`, so building the CLI parser stays cheap.
Must not import the course toolkit or the grader.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import signal
import socket
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Final

from labkit.transports.limits import (
    DEFAULT_HOST,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_PORT,
    DEFAULT_TIMEOUT_SECONDS,
    ConnectionLimits,
)

if TYPE_CHECKING:
    from labkit.auth import Authenticator
    from labkit.legacy import LegacyLimits
    from labkit.sandbox import SandboxMode
    from labkit.server import Server
    from labkit.stores.sweeper import PendingSweeper
    from labkit.url_mode import ConsentService

log = logging.getLogger("labkit.serve")

EXIT_OK: Final = 0
EXIT_ENVIRONMENT: Final = 1
EXIT_CONFIG: Final = 2

DESCRIPTION: Final = """\
Serve labkit's MCP 2026-07-28 server.

stdio (the default): newline-delimited JSON-RPC on stdin/stdout, logs on stderr; the server
acts for the one principal configured with `stdio = true` (alice in the demo). It stops on
EOF, SIGINT or SIGTERM.

http: Streamable HTTP at http://HOST:PORT/mcp (POST only; application/json responses, or
SSE events when a call reports progress and the client accepts text/event-stream),
authenticated with `Authorization: Bearer <token>`; Host and Origin are checked against
loopback names (and the config's [http] allowed_hosts / allowed_origins).

Without --config the demo deployment runs: in-memory notes, principals alice and mallory, a
random signing key, and over HTTP the public demo tokens `demo-alice` and `demo-mallory`
(loopback only). `--profile conformance` serves the same core with the official conformance
suite's fixture tools, prompts and resources registered beside the lesson's tool, without
authentication (loopback only, no --config). A config file sets principals, token hashes,
workspaces, signing keys, stores and the sandbox; see docs/configuration.md."""

EPILOG: Final = """\
examples:
  labkit serve                                  # demo deployment over stdio
  labkit serve --transport http --port 8000     # demo deployment at http://127.0.0.1:8000/mcp
  labkit serve --config labkit.toml --transport http --host 127.0.0.1 --port 9000
  labkit serve --transport http --profile conformance --port 0   # the suite's fixtures

exit status: 0 clean stop, 1 the environment refused (port in use, a database that cannot
be opened, sandbox required but unavailable), 2 bad configuration or usage."""


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65_535:
        raise argparse.ArgumentTypeError(f"port {value} is outside 0-65535")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = DESCRIPTION
    parser.epilog = EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument(
        "--transport",
        choices=("stdio", "http"),
        default="stdio",
        help="stdio (default): JSON-RPC lines on stdin/stdout; http: Streamable HTTP at /mcp",
    )
    parser.add_argument(
        "--host",
        default=None,
        help=f"address to listen on with --transport http (default: [http] host from the "
        f"config, else {DEFAULT_HOST}); anything but loopback exposes the server to the network",
    )
    parser.add_argument(
        "--port",
        type=_port,
        default=None,
        help=f"TCP port with --transport http (default: [http] port from the config, else "
        f"{DEFAULT_PORT}); 0 picks a free port and logs it",
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        type=Path,
        default=None,
        help="TOML configuration file (principals, token hashes, workspaces, signing key "
        "files, stores, sandbox); without it the demo deployment runs",
    )
    parser.add_argument(
        "--profile",
        choices=("lesson", "conformance"),
        default="lesson",
        help="lesson (default): the lesson's deployment; conformance: the same core with the "
        "conformance suite's fixtures and no authentication (loopback only, no --config)",
    )
    parser.set_defaults(run=run)


@dataclass
class Plan:
    """Everything `run` needs once the configuration has been accepted."""

    server: Server
    stdio_principal: str | None
    authenticator: Authenticator | None
    sandbox_mode: SandboxMode
    read_write: tuple[Path, ...] = ()
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    blocking_methods: frozenset[str] = field(default_factory=lambda: frozenset({"tools/call"}))
    connection_limits: ConnectionLimits = field(default_factory=ConnectionLimits)
    # URL-mode consent (notes_export): the service, and who may sign in on its page.
    consent: ConsentService | None = None
    consent_authenticator: Authenticator | None = None
    public_url: str | None = None
    # The bounds of sessions of the eras beside 2026-07-28 ([legacy]); None: labkit.legacy's
    # defaults.
    legacy_limits: LegacyLimits | None = None
    # The background sweep of pending claims, for stores that take two steps to delete.
    sweeper: PendingSweeper | None = None


def run(args: argparse.Namespace) -> int:
    if log.getEffectiveLevel() > logging.INFO:
        log.setLevel(logging.INFO)  # start-up facts (address, principal, sandbox) always show
    from labkit.config import ConfigError, StoreStartupError

    where = f"{args.config}: " if args.config is not None else ""
    try:
        plan = _plan(args)
    except ConfigError as exc:
        print(f"labkit serve: {where}{exc}", file=sys.stderr)
        return EXIT_CONFIG
    except StoreStartupError as exc:
        log.debug("start-up failed", exc_info=True)
        print(f"labkit serve: {where}{exc}", file=sys.stderr)
        return EXIT_ENVIRONMENT
    except Exception as exc:
        # A store that cannot be opened (database down, disk refused): the environment, not
        # the file. One line by default; the traceback with --verbose.
        log.debug("start-up failed", exc_info=True)
        reason = " ".join(str(exc).split())
        print(f"labkit serve: cannot start: {type(exc).__name__}: {reason}", file=sys.stderr)
        return EXIT_ENVIRONMENT
    if args.transport == "stdio":
        assert plan.stdio_principal is not None
        return _serve_stdio(plan, plan.stdio_principal)
    return _serve_http(plan)


def _plan(args: argparse.Namespace) -> Plan:
    from labkit.config import ConfigError

    if args.profile == "conformance":
        if args.config is not None:
            raise ConfigError("--profile", "the conformance profile takes no --config")
        plan = _conformance_plan()
        http_host, http_port = DEFAULT_HOST, DEFAULT_PORT
    elif args.config is None:
        plan = _demo_plan(args.transport)
        http_host, http_port = DEFAULT_HOST, DEFAULT_PORT
    else:
        plan, http_host, http_port = _config_plan(args.config, args.transport)
    plan.host = args.host if args.host is not None else http_host
    plan.port = args.port if args.port is not None else http_port
    if args.transport == "http" and args.config is None and not _is_loopback(plan.host):
        raise ConfigError(
            "--host", "the demo and conformance profiles have public access; loopback only"
        )
    return plan


def _demo_plan(transport: str) -> Plan:
    from labkit.auth import demo_authenticator
    from labkit.deployment import demo_deployment

    log.warning(
        "no --config: serving the demo deployment (in-memory notes, principals alice and "
        "mallory, a random signing key); nothing persists"
    )
    deployment = demo_deployment()
    # Over stdio too: the consent page's sign-in is alice's demo token.
    authenticator = demo_authenticator()
    return Plan(
        server=deployment.server,
        stdio_principal="alice",
        authenticator=authenticator if transport == "http" else None,
        consent=deployment.consent,
        consent_authenticator=authenticator,
        # Nothing on disk to reach: the demo can be confined to reading its own installation.
        sandbox_mode="best_effort",
        # Everything lives in memory: answering inline is cheaper than a thread hop.
        blocking_methods=frozenset(),
    )


def _conformance_plan() -> Plan:
    from labkit.conformance import ANONYMOUS, AnonymousAuthenticator, conformance_server
    from labkit.deployment import demo_deployment

    log.warning(
        "conformance profile: the suite's fixtures beside the demo deployment, every request "
        "acting for %r without credentials (loopback only)",
        ANONYMOUS,
    )
    demo = demo_deployment()
    return Plan(
        # The lesson's notes_delete only: notes_export needs a consent page this anonymous
        # profile does not serve.
        server=conformance_server(keys=demo.keys, tools=[demo.server.tools["notes_delete"]]),
        stdio_principal=ANONYMOUS,
        authenticator=AnonymousAuthenticator(),
        sandbox_mode="best_effort",
        blocking_methods=frozenset(),
    )


def _config_plan(path: Path, transport: str) -> tuple[Plan, str, int]:
    from labkit.config import load_config
    from labkit.stores import speaks_two_step
    from labkit.stores.sweeper import PendingSweeper

    config = load_config(path)
    settings = config.settings
    # notes_export needs its consent page, and the page needs principals who can sign in.
    consent_authenticator = config.authenticator() if config.has_tokens() else None
    consent = config.consent_service() if consent_authenticator is not None else None
    notes, replay = config.open_stores()
    plan = Plan(
        server=config.build_server(consent=consent, stores=(notes, replay)),
        stdio_principal=config.stdio_principal() if transport == "stdio" else None,
        authenticator=config.authenticator() if transport == "http" else None,
        sandbox_mode=settings.server.sandbox,
        read_write=config.sandbox_paths(),
        allowed_hosts=tuple(settings.http.allowed_hosts),
        allowed_origins=tuple(settings.http.allowed_origins),
        max_body_bytes=settings.http.max_body_bytes,
        timeout_seconds=settings.http.timeout_seconds,
        connection_limits=settings.http.connection_limits(),
        consent=consent,
        consent_authenticator=consent_authenticator,
        public_url=settings.http.public_url,
        legacy_limits=settings.legacy.limits(),
        sweeper=PendingSweeper(notes, replay) if speaks_two_step(notes, replay) else None,
    )
    stores = settings.stores
    if stores.notes == stores.replay == stores.consent == "memory":
        # Nothing can wait on a lock or a disk: calls are answered inline. A SQLite consent
        # store can (another process may hold its lock), so then calls run off the loop.
        plan.blocking_methods = frozenset()
    return plan, settings.http.host, settings.http.port


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _own_host_names(host: str) -> tuple[str, ...]:
    """The `Host` names of the listening address itself, as a client would type it in the URL
    the server logs (any port): `127.0.0.2`, `[::2]`, `example.internal`. A wildcard address
    names no host; clients reach it through a configured name or the loopback names."""
    bare = host.strip("[]")
    if bare in ("0.0.0.0", "::", ""):
        return ()
    return (f"[{bare}]",) if ":" in bare else (bare.lower(),)


def _own_origins(host: str, port: int) -> tuple[str, ...]:
    """The `Origin` values of the listening address itself at `port`: a page the server
    serves (or one at the URL it logs) sends these."""
    return tuple(
        f"{scheme}://{name}:{port}"
        for name in _own_host_names(host)
        for scheme in ("http", "https")
    )


@contextmanager
def _sweeping(plan: Plan) -> Iterator[None]:
    """The background sweep of pending claims for the duration. Started after the sandbox:
    Landlock restricts only the threads started after it."""
    if plan.sweeper is None:
        yield
        return
    plan.sweeper.start()
    try:
        yield
    finally:
        plan.sweeper.stop()


@contextmanager
def _signals(handler: Callable[[], None]) -> Iterator[None]:
    """Route SIGINT and SIGTERM to `handler` for the duration, then restore the old ones."""

    def on_signal(signum: int, frame: FrameType | None) -> None:
        log.info("received %s", signal.Signals(signum).name)
        handler()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


class _Refused(Exception):
    """The environment refused to let the server start (exit status 1)."""


def _confine(plan: Plan) -> None:
    """Apply the sandbox (layer 3): after every file the server needs at start is open, and
    before any thread exists, because Landlock restricts only the calling thread and the
    threads it starts afterwards (docs/security.md, "Layer 3")."""
    from labkit.sandbox import SandboxUnavailable, apply_sandbox

    try:
        report = apply_sandbox(plan.sandbox_mode, read_write=[str(p) for p in plan.read_write])
    except SandboxUnavailable as exc:
        raise _Refused(f"server.sandbox is 'required' but cannot be applied: {exc}") from None
    except ValueError as exc:
        raise _Refused(f"sandbox: {exc}") from None
    log.info(
        "sandbox %s (mode %s, Landlock ABI %d): %s",
        "applied" if report.applied else "not applied",
        report.mode,
        report.abi,
        report.reason,
    )


def _serve_stdio(plan: Plan, principal: str) -> int:
    from labkit.transports.eras import ERAS
    from labkit.transports.stdio import StdioTransport

    # stdio has no HTTP listener of its own: URL-mode consent gets a loopback one. The socket
    # is bound before the sandbox; its thread starts after (Landlock covers later threads).
    consent_sock = None
    if plan.consent is not None and plan.consent_authenticator is not None:
        try:
            consent_sock = _bind(DEFAULT_HOST, 0, plan.connection_limits)
        except OSError as exc:
            print(f"labkit serve: cannot listen for the consent page: {exc}", file=sys.stderr)
            return EXIT_ENVIRONMENT
    try:
        _confine(plan)
    except _Refused as exc:
        print(f"labkit serve: {exc}", file=sys.stderr)
        return EXIT_ENVIRONMENT
    # Every era of the table is served beside 2026-07-28, bounded by [legacy].
    transport = StdioTransport(plan.server, principal, eras=ERAS, limits=plan.legacy_limits)
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    log.info("serving MCP over stdio as principal %r", principal)
    real_stdout = sys.stdout
    # A stray print() anywhere would corrupt the protocol stream: send it to stderr instead.
    sys.stdout = sys.stderr
    try:
        with _consent_listener(plan, consent_sock), _sweeping(plan), _signals(transport.stop):
            transport.serve(stdin, stdout)
    finally:
        sys.stdout = real_stdout
    return EXIT_OK


@contextmanager
def _consent_listener(plan: Plan, sock: socket.socket | None) -> Iterator[None]:
    """Serve the consent page on `sock` in a thread for the duration (stdio only), under the
    connection layer and `[http]` limits of `--transport http`."""
    if sock is None or plan.consent is None or plan.consent_authenticator is None:
        yield
        return
    import threading

    import uvicorn

    from labkit.transports.connections import server_config
    from labkit.transports.consent_page import ConsentPage, create_consent_app

    page = ConsentPage(
        plan.consent, plan.consent_authenticator, timeout_seconds=plan.timeout_seconds
    )
    # The same connection layer and limits as `--transport http`: head deadline and size cap,
    # body deadline, connections bounded by the descriptor limit.
    config = server_config(create_consent_app(page), plan.connection_limits, lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="consent-page", daemon=True
    )
    port = sock.getsockname()[1]
    plan.consent.base_url = f"http://{DEFAULT_HOST}:{port}"
    thread.start()
    log.info("serving the consent page at http://%s:%d%s", DEFAULT_HOST, port, "/connect/")
    try:
        yield
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def _bind(host: str, port: int, limits: ConnectionLimits) -> socket.socket:
    from labkit.transports.connections import defer_accept

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets whose proto says TCP;
    # without it every response waits on the client's delayed ACK (about 40 ms).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        defer_accept(sock, limits)
        sock.bind((host.strip("[]"), port))
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def _serve_http(plan: Plan) -> int:
    import uvicorn

    from labkit.legacy import LegacyLimits
    from labkit.transports.connections import server_config
    from labkit.transports.consent_page import ConsentPage
    from labkit.transports.eras import ERAS
    from labkit.transports.http import create_app

    assert plan.authenticator is not None
    try:
        sock = _bind(plan.host, plan.port, plan.connection_limits)
    except OSError as exc:
        print(
            f"labkit serve: cannot listen on {plan.host}:{plan.port}: {exc.strerror}",
            file=sys.stderr,
        )
        return EXIT_ENVIRONMENT
    bound_port = sock.getsockname()[1]
    allowed_hosts = [*plan.allowed_hosts, *_own_host_names(plan.host)]
    consent_page = None
    if plan.consent is not None and plan.consent_authenticator is not None:
        consent_page = ConsentPage(
            plan.consent,
            plan.consent_authenticator,
            allowed_hosts=allowed_hosts,
            timeout_seconds=plan.timeout_seconds,
        )
    app = create_app(
        plan.server,
        plan.authenticator,
        # The listening address at its port is this server's own origin, as it is its Host.
        allowed_origins=[*plan.allowed_origins, *_own_origins(plan.host, bound_port)],
        allowed_hosts=allowed_hosts,
        max_body_bytes=plan.max_body_bytes,
        timeout_seconds=plan.timeout_seconds,
        blocking_methods=plan.blocking_methods,
        consent_page=consent_page,
        # Every era of the table on the same endpoint (sessions live in this process).
        eras=[
            era.http(
                plan.server,
                plan.legacy_limits or LegacyLimits(),
                "tools/call" in plan.blocking_methods,
            )
            for era in ERAS
        ],
    )
    with sock:
        try:
            _confine(plan)
        except _Refused as exc:
            print(f"labkit serve: {exc}", file=sys.stderr)
            return EXIT_ENVIRONMENT
        shown = f"[{plan.host.strip('[]')}]" if ":" in plan.host else plan.host
        if not _is_loopback(plan.host):
            log.warning("listening on %s: reachable from the network", plan.host)
        if plan.consent is not None:
            # The consent page lives on this very server and port, beside /mcp.
            link_host = DEFAULT_HOST if plan.host in ("0.0.0.0", "::") else shown
            plan.consent.base_url = plan.public_url or f"http://{link_host}:{bound_port}"
        server = uvicorn.Server(server_config(app, plan.connection_limits))
        log.info("serving MCP over Streamable HTTP at http://%s:%d/mcp", shown, bound_port)
        # uvicorn catches SIGINT/SIGTERM itself, shuts down gracefully, restores these handlers
        # and re-raises the signal into them: they only need to not kill the process.
        with _sweeping(plan), _signals(lambda: None):
            server.run(sockets=[sock])
    log.info("stopped")
    return EXIT_OK
