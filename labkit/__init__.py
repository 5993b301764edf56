"""labkit: explicit scope and stateless elicitation for MCP 2026-07-28.

The public surface of the core: the sans-IO server and its request context, the one exception
type and the error codes a lesson names, strict `file:` URIs and containment, the key ring and
the state digest, the clocks, the stores a lesson builds by hand, the confined filesystem root,
the deployment builders, `messages` (the pure request and answer builders every client-side
piece shares) and `legacy` (the 2025-11-25 adapter). Every name a notebook imports from labkit
is in `__all__`. Must not import a transport, the course toolkit or the grader: `import labkit`
stays the protocol core.
"""

from labkit import legacy, messages
from labkit._version import __version__
from labkit.clock import Clock, FakeClock, system_clock
from labkit.deployment import Deployment, create_server, demo_deployment
from labkit.errors import MISSING_CAPABILITY, ProtocolError
from labkit.fsroot import Refused, Root
from labkit.scope import (
    AllowlistAuthorizer,
    ScopeError,
    authorize,
    contains,
    format_file_uri,
    parse_file_uri,
)
from labkit.server import RequestContext, Server
from labkit.state import KeyRing, digest
from labkit.stores.filesystem import FilesystemNoteStore
from labkit.stores.memory import MemoryNoteStore, MemoryReplayStore

__all__ = [
    "MISSING_CAPABILITY",
    "AllowlistAuthorizer",
    "Clock",
    "Deployment",
    "FakeClock",
    "FilesystemNoteStore",
    "KeyRing",
    "MemoryNoteStore",
    "MemoryReplayStore",
    "ProtocolError",
    "Refused",
    "RequestContext",
    "Root",
    "ScopeError",
    "Server",
    "__version__",
    "authorize",
    "contains",
    "create_server",
    "demo_deployment",
    "digest",
    "format_file_uri",
    "legacy",
    "messages",
    "parse_file_uri",
    "system_clock",
]
