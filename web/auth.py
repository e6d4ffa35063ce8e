"""Who may use the HTTP service, and from where.

Local LLM tools that listen on localhost have been driven by other web pages open in the same
browser (cross-site posts, DNS rebinding: the MCP Inspector, Ollama). So, before any route
runs (`Guard`):

- the `Host` header must name the address the server is bound to: a page on evil.example
  whose name was rebound to 127.0.0.1 still says `Host: evil.example`. Bound to every
  interface (0.0.0.0, ::), that is any of the machine's names, loopback, or the address the
  request came in on (the connection's own end, which no page can choose);
- a state-changing request (anything but GET, HEAD, OPTIONS) is refused when its `Origin` is
  not this server's own, or when the browser marks it as coming from another site
  (`Sec-Fetch-Site`);
- a body is read only as `Content-Type: application/json`: a form or `text/plain` post, which
  a browser sends to any site without asking first, runs nothing.

And per route (`Tokens`): the admin API takes FSAGENT_ADMIN_TOKEN as a bearer token, compared
in constant time: 403 on every admin endpoint while no token is configured, 401 when it is
missing or wrong. Bound to a non-loopback address, every endpoint needs it, the chat API too.
"""

from __future__ import annotations

import hmac
import ipaddress
import socket
from dataclasses import dataclass

from fastapi import Request
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
WILDCARDS = ("0.0.0.0", "::", "")
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
# What Sec-Fetch-Site says for a request the person made on this page or by hand.
OWN_FETCH_SITES = frozenset({"same-origin", "none"})


class Refused(Exception):
    """A request refused with `status`; `text` is the one line the client reads."""

    def __init__(self, status: int, text: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(text)
        self.status = status
        self.text = text
        self.headers = headers


def refusal(error: Refused) -> JSONResponse:
    return JSONResponse({"error": error.text}, error.status, headers=error.headers)


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Access:
    """Where the server listens and who may use it."""

    host: str
    port: int
    token: str | None = None  # FSAGENT_ADMIN_TOKEN; None turns the admin API off
    allowed_hosts: tuple[str, ...] = ()  # more names for the Host header (--allowed-host)
    cors_origins: tuple[str, ...] = ()  # pages allowed to call the API (--cors-origin)

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)

    @property
    def open_to_local_callers(self) -> bool:
        """Bound to loopback, the chat API needs no token; elsewhere every endpoint does."""
        return self.loopback

    @property
    def url(self) -> str:
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{shown}:{self.port}/"

    @property
    def wildcard(self) -> bool:
        return self.host in WILDCARDS

    def host_names(self, local_address: str | None = None) -> set[str]:
        """The names a Host header may give; `local_address`: the connection's own end."""
        names = {self.host.lower().strip("[]"), *(h.lower() for h in self.allowed_hosts)}
        if self.loopback or self.wildcard:
            names |= set(LOOPBACK_NAMES)
        if self.wildcard:
            names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
            if local_address:  # an IPv4 client on a v6 socket shows as ::ffff:a.b.c.d
                names |= {local_address.lower(), local_address.lower().removeprefix("::ffff:")}
        return names

    def host_problem(self, header: str, local_address: str | None = None) -> str | None:
        name, port = split_host(header)
        # No port in the header means the scheme's own: 80.
        if name in self.host_names(local_address) and (port or 80) == self.port:
            return None
        return (
            f"Host {header[:100]!r} does not name this server ({self.host}:{self.port}); "
            "use its address, or start serve with --allowed-host NAME"
        )

    def origin_problem(self, headers: Headers) -> str | None:
        """Why a state-changing request must not run: it comes from another page."""
        origin = headers.get("origin")
        if origin is not None and origin in self.cors_origins:
            return None
        if origin is not None and origin not in own_origins(headers.get("host", "")):
            return f"a request from {origin[:100]!r} may not change anything here"
        site = headers.get("sec-fetch-site")
        if site is not None and site not in OWN_FETCH_SITES:
            return f"a {site} request may not change anything here"
        return None


def split_host(header: str) -> tuple[str, int | None]:
    """(name, port) of a Host header: `name`, `name:port`, `[v6]` or `[v6]:port`; port -1
    when it is not a number."""
    header = header.strip().lower()
    if header.startswith("["):
        name, _, rest = header[1:].partition("]")
        port_text = rest.removeprefix(":") if rest.startswith(":") else None
    else:
        name, colon, port_text_or_empty = header.partition(":")
        port_text = port_text_or_empty if colon else None
    if port_text is None:
        return name, None
    return name, int(port_text) if port_text.isdigit() else -1


def own_origins(host_header: str) -> set[str]:
    return {f"http://{host_header}", f"https://{host_header}"}


class Guard:
    """The checks every request passes before any route runs: Host, then, for a request that
    changes something, Origin and Content-Type. A refused request reaches nothing else."""

    def __init__(self, app: ASGIApp, access: Access) -> None:
        self.app = app
        self.access = access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            try:
                local = (scope.get("server") or (None,))[0]
                self.check(scope["method"], Headers(scope=scope), local)
            except Refused as error:
                await refusal(error)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def check(self, method: str, headers: Headers, local_address: str | None = None) -> None:
        problem = self.access.host_problem(headers.get("host", ""), local_address)
        if problem:
            raise Refused(400, problem)
        if method in SAFE_METHODS:
            return
        problem = self.access.origin_problem(headers)
        if problem:
            raise Refused(403, problem)
        if method in BODY_METHODS and not is_json(headers.get("content-type", "")):
            raise Refused(
                415, "send the body as JSON, with the header Content-Type: application/json"
            )


def is_json(content_type: str) -> bool:
    return content_type.split(";")[0].strip().lower() == "application/json"


class Tokens:
    """The bearer-token checks, as FastAPI dependencies."""

    def __init__(self, access: Access) -> None:
        self.access = access

    def admin(self, request: Request) -> None:
        if not self.access.token:
            raise Refused(
                403, "the admin API is off: start serve with FSAGENT_ADMIN_TOKEN set to turn it on"
            )
        self.require(request)

    def chat(self, request: Request) -> None:
        if not self.access.open_to_local_callers:
            self.require(request)

    def require(self, request: Request) -> None:
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        token = self.access.token or ""
        if scheme.lower() != "bearer" or not given.strip():
            raise Refused(401, "a bearer token is needed (Authorization: Bearer TOKEN)", BEARER)
        # Constant time: how much of a guess matched must not show in how long the answer took.
        if not token or not hmac.compare_digest(given.strip().encode(), token.encode()):
            raise Refused(401, "the token is wrong", BEARER)


BEARER = {"WWW-Authenticate": "Bearer"}
