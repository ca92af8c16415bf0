"""Who may talk to the web app and what its pages may load: the HTTP guard in front of Gradio.

Three rules, applied to every request the server answers (pages, ``/config``, the Gradio API,
the queue, files, uploads, websockets):

* **Host allow-list** (against DNS rebinding: a web page whose name is made to resolve to
  127.0.0.1 would otherwise be same-origin with the app). The ``Host`` header must name
  ``localhost``, ``127.0.0.1``, ``[::1]``, the address the app is bound to, or a name given with
  ``--allowed-host`` / ``ANYCODE_ALLOWED_HOSTS``; any other name is refused with 403. An IP
  address cannot be rebound, so when the app listens on every interface (``0.0.0.0``/``::``)
  any IP literal is accepted as well.
* **No cross-origin access.** A request carrying an ``Origin`` other than the app's own
  (scheme-independent ``host:port`` of the ``Host`` header) is refused with 403, CORS
  preflights included, and no ``Access-Control-*`` header ever leaves the server. Gradio's own
  CORS middleware reflects any ``Origin`` with credentials allowed when the ``Host`` is not one
  of ``localhost``/``127.0.0.1``/``0.0.0.0`` (e.g. ``--host 127.0.0.2`` or ``::1``); this guard
  sits outside it, so that never reaches a browser.
* **Content-Security-Policy** on every response: the page loads images, media, fonts, styles,
  frames and connections from the app itself only (plus ``data:``/``blob:`` where Gradio needs
  them), so nothing named in chat content is fetched (:data:`CONTENT_SECURITY_POLICY`).

The guard is an ASGI middleware installed around Gradio's whole middleware stack (Gradio adds
its CORS middleware as the outermost layer, out of reach of ``app_kwargs["middleware"]``), from
the app's lifespan, which uvicorn runs before it binds its socket: no request is ever served
without it (:func:`install`, :func:`is_installed`).
"""
from __future__ import annotations

import ipaddress
import logging
import os
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterable
from urllib.parse import urlsplit

from webui.server.stack import wrap_stack

log = logging.getLogger(__name__)

ALLOWED_HOSTS_ENV = "ANYCODE_ALLOWED_HOSTS"
ALWAYS_ALLOWED = ("localhost", "127.0.0.1", "::1")

# Gradio's page needs inline and eval'd script (its config and the ``js=`` hooks), inline
# styles, and data:/blob: images and media (uploads previews, generated files); it fetches only
# from its own origin. Nothing else is allowed: a URL in a message stays a URL.
CSP_DIRECTIVES = (
    ("default-src", "'self'"),
    ("script-src", "'self' 'unsafe-inline' 'unsafe-eval' blob:"),
    ("style-src", "'self' 'unsafe-inline'"),
    ("img-src", "'self' data: blob:"),
    ("media-src", "'self' data: blob:"),
    ("font-src", "'self' data:"),
    ("connect-src", "'self'"),
    ("frame-src", "'self'"),
    ("worker-src", "'self' blob:"),
    ("manifest-src", "'self'"),
    ("object-src", "'none'"),
    ("base-uri", "'self'"),
    ("form-action", "'self'"),
    ("frame-ancestors", "'none'"),
)
CONTENT_SECURITY_POLICY = "; ".join(f"{name} {value}" for name, value in CSP_DIRECTIVES)

# Added to every response (replacing any the app set).
RESPONSE_HEADERS = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"referrer-policy", b"no-referrer"),  # an opened link never learns ?session=<id>
    (b"x-frame-options", b"DENY"),  # older browsers' frame-ancestors
    (b"x-content-type-options", b"nosniff"),
)
_REPLACED = {name for name, _ in RESPONSE_HEADERS}


def parse_allowed_hosts(values: Iterable[str] | None) -> list[str]:
    """Host names/addresses from ``--allowed-host`` values and ``ANYCODE_ALLOWED_HOSTS`` (each may
    hold several, comma- or space-separated), normalised by :func:`normalize_host`.

    Raises ``ValueError`` (one sentence) for an entry with a scheme, path or port."""
    out: list[str] = []
    for value in values or ():
        for item in value.replace(",", " ").split():
            if "/" in item or (":" in item and not _is_ipv6(item)):
                raise ValueError(f"allowed host {item!r} must be a bare host name or address "
                                 "(no scheme, port or path), e.g. anycode.example.lan")
            out.append(normalize_host(item))
    return out


def _is_ipv6(item: str) -> bool:
    try:
        return isinstance(ipaddress.ip_address(item.strip("[]")), ipaddress.IPv6Address)
    except ValueError:
        return False


def normalize_host(name: str) -> str:
    """A host name or address as compared: lower case, no IPv6 brackets, no trailing dot."""
    return name.strip().strip("[]").lower().rstrip(".")


def _ip(name: str) -> Any:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


@dataclass(frozen=True)
class HostPolicy:
    """Which ``Host`` names the app answers to.

    ``names``: normalised host names and addresses (:func:`normalize_host`);
    ``any_ip``: accept every IP literal (the app listens on all interfaces)."""

    names: frozenset[str] = field(default_factory=lambda: frozenset(ALWAYS_ALLOWED))
    any_ip: bool = False

    @classmethod
    def for_server(cls, bind_host: str, extra: Iterable[str] = ()) -> "HostPolicy":
        """The policy of a server bound to ``bind_host`` (as given to ``--host``), also accepting
        the ``extra`` names (already parsed with :func:`parse_allowed_hosts`)."""
        bound = normalize_host(bind_host)
        ip = _ip(bound)
        names = set(ALWAYS_ALLOWED) | {bound} | {normalize_host(n) for n in extra}
        return cls(frozenset(names), any_ip=bool(ip is not None and ip.is_unspecified))

    def allows(self, host: str) -> bool:
        """True when ``host`` (a bare name or address, not normalised yet) may be served."""
        name = normalize_host(host)
        if name in self.names:
            return True
        ip = _ip(name)
        if ip is None:
            return False
        if self.any_ip:
            return True
        # "::ffff:127.0.0.1" and "127.0.0.1" are one address
        mapped = getattr(ip, "ipv4_mapped", None)
        return mapped is not None and str(mapped) in self.names


def split_host_header(value: str) -> tuple[str, int | None] | None:
    """``"name:port"`` / ``"[v6]:port"`` / ``"name"`` -> ``(name, port or None)``; None when it is
    not a valid Host header value (userinfo, a path, a bad port)."""
    if not value or any(c in value for c in "/@?#\\ \t") or value != value.strip():
        return None
    try:
        parts = urlsplit("//" + value)
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname:
        return None
    return parts.hostname, port


DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def same_origin(origin: str, host_header: str, scheme: str) -> bool:
    """True when the ``Origin`` header ``origin`` names the site the request was sent to: the same
    host and port as the ``Host`` header (default ports filled in from the schemes). The scheme
    itself is not compared, so a TLS-terminating proxy in front still works; ``null`` and
    anything that is not an http(s) origin is foreign."""
    try:
        parts = urlsplit(origin)
        o_port = parts.port
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
        return False
    target = split_host_header(host_header)
    if target is None:
        return False
    h_name, h_port = target
    o_port = o_port or DEFAULT_PORTS[parts.scheme]
    h_port = h_port or DEFAULT_PORTS.get(scheme, 80)
    return normalize_host(parts.hostname) == normalize_host(h_name) and o_port == h_port


ASGIApp = Callable[[dict, Callable[[], Awaitable[dict]], Callable[[dict], Awaitable[None]]],
                   Awaitable[None]]


class SecurityMiddleware:
    """ASGI middleware enforcing :class:`HostPolicy`, same-origin requests and the response headers
    of this module on ``http`` and ``websocket`` scopes; other scopes (lifespan) pass through."""

    def __init__(self, app: ASGIApp, policy: HostPolicy,
                 after_upload: Callable[[], None] | None = None):
        self.app = app
        self.policy = policy
        self.after_upload = after_upload  # called when an upload request's answer starts
        self._warned: set[str] = set()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        kind = scope.get("type")
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        host, origin = None, None
        for name, value in scope.get("headers") or ():
            if name == b"host":
                if host is not None:  # two Host headers: which one would the app believe?
                    host = ""
                    break
                host = value.decode("latin-1")
            elif name == b"origin":
                origin = value.decode("latin-1")
        refusal = self.refusal(host, origin, scope.get("scheme", "http"))
        if refusal is not None:
            self._log(refusal)
            if kind == "websocket":
                await send({"type": "websocket.close", "code": 1008})
            else:
                await _forbidden(send, refusal)
            return
        send = _with_headers(send)
        if self.after_upload is not None and scope.get("method") == "POST" \
                and str(scope.get("path", "")).endswith("/upload"):
            # The uploaded files are written before the answer starts: make them private then,
            # before the client learns their paths (after the answer, a reader could come first).
            answered = send

            async def send(message: dict) -> None:
                if message.get("type") == "http.response.start":
                    try:
                        self.after_upload()
                    except OSError as err:  # never fail the request over it; say so
                        log.warning("could not restrict the uploaded files' folders: %s", err)
                await answered(message)
        await self.app(scope, receive, send)

    def refusal(self, host: str | None, origin: str | None, scheme: str) -> str | None:
        """Why a request with these ``Host`` and ``Origin`` header values is refused (one
        sentence), or None when it may be served."""
        target = split_host_header(host or "")
        if target is None:
            return "anycode refused this request: its Host header is missing or malformed."
        if not self.policy.allows(target[0]):
            return (f"anycode refused this request: it is not served under the name "
                    f"{target[0]!r}. Start anycode with --allowed-host {target[0]} "
                    f"(or set {ALLOWED_HOSTS_ENV}) to allow it.")
        if origin is not None and not same_origin(origin, host or "", scheme):
            return ("anycode refused this request: it came from another site "
                    f"(Origin {origin[:100]!r}); anycode accepts no cross-origin requests.")
        return None

    def _log(self, refusal: str) -> None:
        if refusal not in self._warned and len(self._warned) < 100:
            self._warned.add(refusal)
            log.warning("%s", refusal)


async def _forbidden(send: Any, text: str) -> None:
    body = (text + "\n").encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"),
               (b"content-length", str(len(body)).encode()), *RESPONSE_HEADERS]
    await send({"type": "http.response.start", "status": 403, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _with_headers(send: Any) -> Any:
    """``send`` adding :data:`RESPONSE_HEADERS` to the response start and dropping every
    ``Access-Control-*`` header (same-origin pages need none; Gradio adds them)."""
    async def wrapped(message: dict) -> None:
        if message.get("type") == "http.response.start":
            headers = [(k, v) for k, v in message.get("headers") or ()
                       if not k.lower().startswith(b"access-control-") and k.lower() not in _REPLACED]
            html = any(k.lower() == b"content-type" and v.lower().startswith(b"text/html") for k, v in headers)
            if html and not any(k.lower() == b"cache-control" for k, _v in headers):
                # The page's HTML carries the sidebar's chat titles (webui.gui.first_paint):
                # never kept in the browser's disk cache.
                headers.append((b"cache-control", b"no-store"))
            message = {**message, "headers": headers + list(RESPONSE_HEADERS)}
        await send(message)

    return wrapped


# --- installing it in Gradio's app --------------------------------------------------------


def install(launch_kwargs: dict[str, Any], policy: HostPolicy,
            after_upload: Callable[[], None] | None = None) -> dict[str, Any]:
    """``launch_kwargs`` (for ``Blocks.launch``) with an ``app_kwargs`` lifespan that wraps the
    app's whole middleware stack in :class:`SecurityMiddleware` (``after_upload``: run after each
    upload, e.g. to make Gradio's new upload folders ``0700``) before uvicorn accepts a
    connection (:func:`webui.server.stack.wrap_stack`). Check the result with
    :func:`is_installed` after launching."""
    return wrap_stack(launch_kwargs, SecurityMiddleware,
                      lambda stack: SecurityMiddleware(stack, policy, after_upload))


def is_installed(app: Any) -> bool:
    """True when ``app`` (a launched Blocks' ``.app``) answers through :class:`SecurityMiddleware`."""
    return isinstance(getattr(app, "middleware_stack", None), SecurityMiddleware)


def allowed_hosts_from_env() -> list[str]:
    """:func:`parse_allowed_hosts` of ``ANYCODE_ALLOWED_HOSTS`` (empty when unset)."""
    return parse_allowed_hosts([os.environ.get(ALLOWED_HOSTS_ENV, "")])
