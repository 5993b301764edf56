"""The deployment configuration file (TOML): parsing, validation, and building a server from it.

Owns: the schema of the file (pydantic models, unknown keys refused), the checks that need the
file system (signing key files) or the whole file (unique principals, one stdio principal),
and `ConfigError`, whose message names the key path and the problem, e.g.
`principals[1].workspaces[0]: must start with file:/// or file://localhost/`.

Reads files only in `load_config` (the TOML file and the key files), once at start.
Must not import the course toolkit or the grader.
"""

from __future__ import annotations

import logging
import os
import stat
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Final

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from labkit.auth import TokenAuthenticator
from labkit.clock import Clock, system_clock
from labkit.deployment import create_server
from labkit.legacy import LegacyLimits
from labkit.sandbox import SandboxMode
from labkit.scope import AllowlistAuthorizer, ScopeError, parse_file_uri
from labkit.server import Server
from labkit.state import KeyRing, key_problem, parse_key_file
from labkit.stores import DEFAULT_CAPACITY, DEFAULT_PER_PRINCIPAL, NoteStore, ReplayStore
from labkit.stores.consent import ConsentStore, MemoryConsentStore, SqliteConsentStore
from labkit.stores.filesystem import SymlinkPolicy
from labkit.stores.open import StoreOpenError, UnsafeLayout, check_layout, open_stores, spec_file
from labkit.stores.sql import DEFAULT_SCHEMA, SCHEMA_PATTERN
from labkit.transports.limits import (
    DEFAULT_DISCARD_BODY_BYTES,
    DEFAULT_DISCARD_BODY_SECONDS,
    DEFAULT_HEAD_TIMEOUT_SECONDS,
    DEFAULT_HOST,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_HEAD_BYTES,
    DEFAULT_PORT,
    DEFAULT_TIMEOUT_SECONDS,
    ConnectionLimits,
)
from labkit.url_mode import ConsentService

log = logging.getLogger("labkit.config")

MAX_KEY_FILE_BYTES: Final = 64 * 1024


class StoreStartupError(Exception):
    """A configured store that could not be opened: the environment refused (`labkit serve`
    exits 1), not the file. The message names the key, the spec (password masked), the reason
    and what to check."""

    def __init__(self, key: str, error: StoreOpenError) -> None:
        super().__init__(f"{key}: {error}")
        self.key = key
        self.error = error


class ConfigError(ValueError):
    """A configuration the server refuses to start with: `key` is the path in the file."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key}: {problem}")
        self.key = key
        self.problem = problem

    def __repr__(self) -> str:
        return f"ConfigError({self.key!r}, {self.problem!r})"


def _workspace_uri(uri: str) -> str:
    try:
        parse_file_uri(uri)
    except ScopeError as exc:
        raise ValueError(f"not a usable workspace URI: {exc.reason}") from None
    return uri


class _Section(BaseModel):
    # Unknown keys are refused (a typo must not silently fall back to a default), and values
    # are not coerced: `stdio = "yes"` is an error, not True.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ServerSettings(_Section):
    audience: str = Field("labkit", min_length=1, max_length=200)
    signing_key_files: list[str] = Field(min_length=1)
    state_ttl_seconds: float = Field(300.0, gt=0, le=86_400)
    sandbox: SandboxMode = "best_effort"
    # Where server-side state files live (the filesystem store's deletion journal). Relative
    # paths resolve against the config file's directory.
    state_dir: str | None = Field(None, min_length=1)


class StoreSettings(_Section):
    notes: str = Field("memory", min_length=1)
    replay: str = Field("memory", min_length=1)
    # The PostgreSQL schema holding labkit's tables (one per deployment sharing a database).
    schema_: str = Field(DEFAULT_SCHEMA, alias="schema", pattern=SCHEMA_PATTERN)
    # The filesystem store's symlink policy (docs/symlink-policy.md).
    symlinks: SymlinkPolicy = "refuse"
    # The URL-mode consent record (notes_export): "memory", or "sqlite:///abs/path.db" so
    # consent survives a restart.
    consent: str = Field("memory", pattern=r"^(memory|sqlite:///.+)$")
    # The replay store's bounds: live confirmations in all, and per principal (so one caller
    # cannot fill the store for everyone else).
    replay_capacity: int = Field(DEFAULT_CAPACITY, ge=1, le=100_000_000)
    replay_per_principal: int = Field(DEFAULT_PER_PRINCIPAL, ge=1, le=100_000_000)

    @model_validator(mode="after")
    def _share_within_capacity(self) -> StoreSettings:
        if self.replay_per_principal > self.replay_capacity:
            raise ValueError(
                f"replay_per_principal ({self.replay_per_principal}) exceeds replay_capacity "
                f"({self.replay_capacity})"
            )
        return self


class HttpSettings(_Section):
    host: str = Field(DEFAULT_HOST, min_length=1)
    port: int = Field(DEFAULT_PORT, ge=0, le=65_535)
    allowed_hosts: list[str] = []
    allowed_origins: list[str] = []
    max_body_bytes: int = Field(DEFAULT_MAX_BODY_BYTES, ge=1024, le=64 * 1024 * 1024)
    timeout_seconds: float = Field(DEFAULT_TIMEOUT_SECONDS, gt=0, le=3600)
    # Hostile clients (transports/connections.py): a connection must finish its request head
    # within head_timeout_seconds of opening (or of its previous response); a head over
    # max_head_bytes is refused with 431; at most max_connections are open at once.
    head_timeout_seconds: float = Field(DEFAULT_HEAD_TIMEOUT_SECONDS, gt=0, le=3600)
    max_head_bytes: int = Field(DEFAULT_MAX_HEAD_BYTES, ge=4096, le=16 * 1024 * 1024)
    max_connections: int = Field(DEFAULT_MAX_CONNECTIONS, ge=1, le=1_000_000)
    # After an answer sent before the request body was read (413, 404, ...), at most this much
    # of the rest of the body is read and dropped, for at most this long, so that a client
    # still sending it receives the answer; past either the connection is closed.
    discard_body_bytes: int = Field(DEFAULT_DISCARD_BODY_BYTES, ge=0, le=1024 * 1024 * 1024)
    discard_body_seconds: float = Field(DEFAULT_DISCARD_BODY_SECONDS, gt=0, le=3600)
    # The scheme://host[:port] browsers use to reach this server (consent links), when it is
    # not the listening address (a name, TLS in front); without it, http://HOST:PORT.
    public_url: str | None = Field(None, pattern=r"^https?://[A-Za-z0-9.\-\[\]:]+$")

    def connection_limits(self) -> ConnectionLimits:
        return ConnectionLimits(
            head_timeout_seconds=self.head_timeout_seconds,
            max_head_bytes=self.max_head_bytes,
            max_connections=self.max_connections,
            discard_body_bytes=self.discard_body_bytes,
            discard_body_seconds=self.discard_body_seconds,
        )


_LEGACY: Final = LegacyLimits()


class LegacySettings(_Section):
    """2025-11-25 sessions (labkit/legacy.py): what one client and one principal may hold."""

    # How long a legacy call waits for the client to answer one of its live requests.
    answer_timeout_seconds: float = Field(_LEGACY.answer_seconds, gt=0, le=3600)
    # Calls in progress per session (a stdio connection is one) and per principal.
    max_calls_per_session: int = Field(_LEGACY.calls_per_session, ge=1, le=10_000)
    max_calls_per_principal: int = Field(_LEGACY.calls_per_principal, ge=1, le=100_000)
    # The HTTP session table: in all, per principal, and the idle lifetime of a session.
    max_sessions: int = Field(_LEGACY.max_sessions, ge=1, le=1_000_000)
    sessions_per_principal: int = Field(_LEGACY.sessions_per_principal, ge=1, le=1_000_000)
    idle_session_seconds: float = Field(_LEGACY.idle_seconds, gt=0, le=7 * 86_400)
    # `resources/subscribe` URIs per session.
    max_subscriptions: int = Field(_LEGACY.subscriptions, ge=1, le=100_000)

    def limits(self) -> LegacyLimits:
        return LegacyLimits(
            answer_seconds=self.answer_timeout_seconds,
            calls_per_session=self.max_calls_per_session,
            calls_per_principal=self.max_calls_per_principal,
            max_sessions=self.max_sessions,
            sessions_per_principal=self.sessions_per_principal,
            idle_seconds=self.idle_session_seconds,
            subscriptions=self.max_subscriptions,
        )


class PrincipalSettings(_Section):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")
    token_sha256: str | None = Field(None, pattern=r"^[0-9a-fA-F]{64}$")
    workspaces: list[Annotated[str, AfterValidator(_workspace_uri)]] = []
    stdio: bool = False


class ConfigFile(_Section):
    server: ServerSettings
    stores: StoreSettings = Field(default_factory=lambda: StoreSettings.model_validate({}))
    http: HttpSettings = Field(default_factory=lambda: HttpSettings.model_validate({}))
    legacy: LegacySettings = Field(default_factory=lambda: LegacySettings.model_validate({}))
    principals: list[PrincipalSettings] = Field(min_length=1)


@dataclass(frozen=True)
class Config:
    """A validated configuration file, the resolved paths of its signing keys, and the keys
    (read once, in `parse_config`)."""

    path: Path
    settings: ConfigFile
    key_files: tuple[Path, ...]
    keys: tuple[bytes, ...] = field(default=(), repr=False)

    def key_ring(self) -> KeyRing:
        return KeyRing(self.keys)

    def stdio_principal(self) -> str:
        """The principal a stdio server acts for; refused when none is marked `stdio = true`."""
        for principal in self.settings.principals:
            if principal.stdio:
                return principal.name
        raise ConfigError("principals", "no principal has stdio = true; a stdio server needs one")

    def authenticator(self) -> TokenAuthenticator:
        hashes = {
            p.name: p.token_sha256.lower() for p in self.settings.principals if p.token_sha256
        }
        if not hashes:
            raise ConfigError(
                "principals", "no principal has a token_sha256; nobody could use the HTTP server"
            )
        return TokenAuthenticator(hashes)

    def has_tokens(self) -> bool:
        return any(p.token_sha256 for p in self.settings.principals)

    def consent_service(self, *, clock: Clock = system_clock) -> ConsentService:
        """The consent service of `notes_export`, on the configured consent store."""
        spec = self.settings.stores.consent
        store: ConsentStore = (
            MemoryConsentStore()
            if spec == "memory"
            else SqliteConsentStore(spec.removeprefix("sqlite://"))
        )
        return ConsentService(store, self.key_ring(), clock=clock)

    def authorizer(self) -> AllowlistAuthorizer:
        return AllowlistAuthorizer({p.name: p.workspaces for p in self.settings.principals})

    def workspaces(self) -> tuple[str, ...]:
        """Every configured workspace URI, each once, in file order."""
        return tuple(dict.fromkeys(w for p in self.settings.principals for w in p.workspaces))

    def state_dir(self) -> Path:
        """`server.state_dir`; else the directory of a SQLite replay database; else the
        per-user state directory (`$XDG_STATE_HOME/labkit`, by default ~/.local/state/labkit)."""
        configured = self.settings.server.state_dir
        if configured is not None:
            return self.path.resolve().parent / Path(configured).expanduser()
        replay = self.settings.stores.replay
        database = spec_file(replay) if replay.startswith("sqlite:") else None
        if database is not None:
            return Path(database).parent
        xdg = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
        return Path(xdg) / "labkit"

    def store_specs(self) -> tuple[str, str]:
        """The notes and replay specs, with a bare `filesystem` given its journal file
        (`intents.db` in the state directory)."""
        stores = self.settings.stores
        notes = stores.notes
        if notes == "filesystem":
            notes = f"filesystem://{self.state_dir() / 'intents.db'}"
        return notes, stores.replay

    def open_stores(self, *, clock: Clock = system_clock) -> tuple[NoteStore, ReplayStore]:
        """Open the configured stores; a spec that is not understood is a `ConfigError`, a
        store that cannot be opened (a missing directory, a database that is down) is
        `StoreStartupError` (an environment problem, not a configuration one)."""
        notes, replay = self.store_specs()
        try:
            check_layout(notes, replay)
        except UnsafeLayout as exc:
            raise ConfigError("stores.replay", str(exc)) from None
        if self.settings.stores.notes == "filesystem":
            try:
                self.state_dir().mkdir(mode=0o700, parents=True, exist_ok=True)
            except OSError as exc:
                raise ConfigError(
                    "server.state_dir", f"cannot create {str(self.state_dir())!r}: {exc.strerror}"
                ) from None
        stores = self.settings.stores
        try:
            return open_stores(
                notes,
                replay,
                workspaces=self.workspaces(),
                clock=clock,
                capacity=stores.replay_capacity,
                per_principal=stores.replay_per_principal,
                schema=stores.schema_,
                symlinks=stores.symlinks,
            )
        except StoreOpenError as exc:
            raise StoreStartupError(f"stores.{exc.role}", exc) from exc
        except ValueError as exc:
            # `open_stores` names the role first: "notes store spec ..." or "replay ...".
            key = "stores.replay" if str(exc).startswith("replay") else "stores.notes"
            raise ConfigError(key, str(exc)) from None

    def sandbox_paths(self) -> tuple[Path, ...]:
        """The directories the server must keep writing after the sandbox is applied: the
        workspaces of a filesystem note store, and the directories of its journal and of
        SQLite databases (SQLite creates its -wal and -shm files beside the database)."""
        notes, replay = self.store_specs()
        paths: list[Path] = []
        if notes.startswith("filesystem"):
            paths += [Path("/" + "/".join(parse_file_uri(w))) for w in self.workspaces()]
        for spec in (notes, replay, self.settings.stores.consent):
            database = spec_file(spec)
            if database is not None:
                paths.append(Path(database).parent)
        return tuple(dict.fromkeys(paths))

    def build_server(
        self,
        *,
        clock: Clock = system_clock,
        consent: ConsentService | None = None,
        stores: tuple[NoteStore, ReplayStore] | None = None,
    ) -> Server:
        """The configured server, on `stores` (default: `open_stores`); with `consent`,
        `notes_export` too."""
        notes, replay = stores if stores is not None else self.open_stores(clock=clock)
        server = self.settings.server
        return create_server(
            keys=self.key_ring(),
            notes=notes,
            replay=replay,
            authorizer=self.authorizer(),
            clock=clock,
            audience=server.audience,
            state_ttl_seconds=server.state_ttl_seconds,
            consent=consent,
        )


def load_config(path: str | Path) -> Config:
    """Read and validate a configuration file, or raise `ConfigError` naming the first problem."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError("(file)", f"cannot read {str(path)!r}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError("(file)", "not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("(file)", f"not valid TOML: {exc}") from None
    return parse_config(raw, base_dir=path.resolve().parent, path=path)


def parse_config(raw: dict[str, Any], *, base_dir: Path, path: Path | None = None) -> Config:
    """Validate an already-parsed TOML document; relative key paths resolve from `base_dir`."""
    try:
        settings = ConfigFile.model_validate(raw)
    except ValidationError as exc:
        raise _first_error(exc) from None
    _check_principals(settings.principals)
    keys = [
        _read_key_file(base_dir, index, name)
        for index, name in enumerate(settings.server.signing_key_files)
    ]
    return Config(
        path or base_dir / "labkit.toml",
        settings,
        tuple(path for path, _ in keys),
        tuple(secret for _, secret in keys),
    )


def _first_error(exc: ValidationError) -> ConfigError:
    errors = exc.errors()
    first = errors[0]
    key = _key_path(first["loc"]) or "(file)"
    kind = first["type"]
    if kind == "extra_forbidden":
        problem = "unknown key"
    elif kind == "missing":
        problem = "required key is missing"
    else:
        problem = str(first["msg"]).removeprefix("Value error, ")
    if len(errors) > 1:
        problem += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    return ConfigError(key, problem)


def _key_path(loc: Sequence[int | str]) -> str:
    """('principals', 1, 'workspaces', 0) -> 'principals[1].workspaces[0]'."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _check_principals(principals: Sequence[PrincipalSettings]) -> None:
    names: dict[str, int] = {}
    hashes: dict[str, int] = {}
    stdio: int | None = None
    for index, principal in enumerate(principals):
        if principal.name in names:
            raise ConfigError(
                f"principals[{index}].name",
                f"{principal.name!r} is already principals[{names[principal.name]}]",
            )
        names[principal.name] = index
        if principal.token_sha256 is not None:
            digest = principal.token_sha256.lower()
            if digest in hashes:
                raise ConfigError(
                    f"principals[{index}].token_sha256",
                    f"the same token hash as principals[{hashes[digest]}]; "
                    "each principal needs its own token",
                )
            hashes[digest] = index
        if principal.stdio:
            if stdio is not None:
                raise ConfigError(
                    f"principals[{index}].stdio",
                    f"principals[{stdio}] is already the stdio principal; exactly one may be",
                )
            stdio = index


def _read_key_file(base_dir: Path, index: int, name: str) -> tuple[Path, bytes]:
    """The path and the key of `server.signing_key_files[index]` (the text-or-raw rule is
    `state.parse_key_file`; the length rule is `state.key_problem`)."""
    key = f"server.signing_key_files[{index}]"
    path = base_dir / Path(name).expanduser()
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(key, f"{str(path)!r} is not a regular file")
        if info.st_size > MAX_KEY_FILE_BYTES:
            raise ConfigError(key, f"{str(path)!r} is too large to be a key file")
        secret, form = parse_key_file(path.read_bytes())
    except OSError as exc:
        raise ConfigError(key, f"cannot read {str(path)!r}: {exc.strerror}") from None
    problem = key_problem(secret)
    if problem is not None:
        how = "base64 text" if form == "text" else "raw bytes, not base64 text"
        raise ConfigError(key, f"{str(path)!r} ({how}) {problem}")
    if info.st_mode & 0o077:
        log.warning("signing key file %s is readable by other users; chmod 600 it", path)
    return path, secret
