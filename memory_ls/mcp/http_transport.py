"""``memory-ls mcp --transport http``: the SDK's streamable HTTP app under uvicorn, so several
agents on one machine share one engine and its warm index.

Loopback only unless a bearer token is set: anything that can reach the port could read
every memory file. With a token, every request (any path, any method) must carry
``Authorization: Bearer <token>`` or gets 401 before the MCP layer sees it. A static token
is compared here rather than through the SDK's OAuth resource-server support, which expects
an authorization server to have issued it.
"""

from __future__ import annotations

import hmac
import ipaddress
import socket
import sys
from dataclasses import dataclass

import uvicorn
from mcp.server.transport_security import TransportSecuritySettings
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from .server import build_server
from .tools import MemoryTools

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
ENDPOINT = "/mcp"
TOKEN_ENV = "MEMORY_LS_MCP_TOKEN"


@dataclass(frozen=True)
class HttpOptions:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    token: str | None = None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


def refusal(options: HttpOptions) -> str | None:
    """Why these options must not be served (one line), or None."""
    if not options.token and not is_loopback(options.host):
        return (
            f"refusing to serve MCP on {options.host} without a bearer token: "
            f"pass --token or set {TOKEN_ENV}, or bind {DEFAULT_HOST}"
        )
    return None


def rebinding_guard(host: str) -> TransportSecuritySettings | None:
    """Host and Origin checked against DNS rebinding on every loopback address (the SDK turns
    this on by itself only for 127.0.0.1, localhost and ::1: bound to 127.0.0.2 without a
    token, any web page could read the memory through a name resolving there)."""
    if not is_loopback(host):
        return None  # off loopback a token is required, and it is what protects the data
    bare = host.strip("[]")
    names = dict.fromkeys(["127.0.0.1", "localhost", "[::1]", f"[{bare}]" if ":" in bare else bare])
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{n}:*" for n in names],
        allowed_origins=[f"http://{n}:*" for n in names],
    )


class BearerToken:
    """ASGI wrapper: 401 for every HTTP request without the right bearer token."""

    def __init__(self, app: ASGIApp, token: str):
        self.app = app
        self.token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
            scheme, _, value = given.partition(b" ")
            # The scheme is case-insensitive (RFC 9110); the token is compared in constant time.
            if scheme.lower() != b"bearer" or not hmac.compare_digest(value.strip(), self.token):
                response = PlainTextResponse(
                    "missing or wrong bearer token\n",
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def listen(options: HttpOptions) -> socket.socket:
    """The listening socket, bound before anything is loaded (a busy port fails at once)."""
    host = options.host.strip("[]")
    family = socket.getaddrinfo(host, options.port, type=socket.SOCK_STREAM)[0][0]
    return socket.create_server((host, options.port), family=family)


async def serve_http(tools: MemoryTools, options: HttpOptions, sock: socket.socket) -> None:
    """Serve on ``sock`` until interrupted; prints the endpoint's URL (the real port for
    ``--port 0``)."""
    app: ASGIApp = build_server(tools).streamable_http_app(
        streamable_http_path=ENDPOINT,
        host=options.host.strip("[]"),
        transport_security=rebinding_guard(options.host),
    )
    if options.token:
        app = BearerToken(app, options.token)
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    print(f"memory-ls: MCP over HTTP at http://{shown}:{port}{ENDPOINT}", file=sys.stderr)
    sys.stderr.flush()
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])
