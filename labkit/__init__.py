"""labkit: explicit scope and stateless elicitation for MCP 2026-07-28.

The public surface: the sans-IO server and its request context, the one exception type, the
key ring, the clocks, the deployment builders, and `messages` (the pure request and answer
builders every client-side piece shares). Must not import a transport, the course toolkit
or the grader: `import labkit` stays the protocol core.
"""

from labkit import messages
from labkit._version import __version__
from labkit.clock import Clock, FakeClock, system_clock
from labkit.deployment import Deployment, create_server, demo_deployment
from labkit.errors import ProtocolError
from labkit.server import RequestContext, Server
from labkit.state import KeyRing

__all__ = [
    "Clock",
    "Deployment",
    "FakeClock",
    "KeyRing",
    "ProtocolError",
    "RequestContext",
    "Server",
    "__version__",
    "create_server",
    "demo_deployment",
    "messages",
    "system_clock",
]
