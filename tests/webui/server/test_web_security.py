"""Who may reach the app (issue 10, defects 1-3): curl-like requests with explicit ``Host`` and
``Origin`` headers against the real launcher bound to 127.0.0.1, 127.0.0.2 and ::1, on every kind
of route (pages, ``/config``, the Gradio API, the queue, files, uploads)."""
from __future__ import annotations

import os
import stat
import uuid
from pathlib import Path

import httpx
import pytest

from tests.support.web_server import app_env, has_ipv6_loopback, launch
from webui.server import gradio_patch, security

BINDS = ["127.0.0.1", "127.0.0.2", "::1"]
EXTRA_NAME, ENV_NAME = "anycode.test", "other.test"  # --allowed-host and ANYCODE_ALLOWED_HOSTS
REFUSED = "anycode refused this request"


@pytest.fixture(scope="module")
def apps(tmp_path_factory):
    """One launched app per bind address (started side by side), keyed by address."""
    binds = [b for b in BINDS if b != "::1" or has_ipv6_loopback()]
    started = {}
    try:
        for bind in binds:
            tmp = tmp_path_factory.mktemp("app-" + bind.replace(":", "v6"))
            env = app_env(tmp / "home", ANYCODE_ALLOWED_HOSTS=ENV_NAME)
            started[bind] = launch(tmp, bind, "--allowed-host", EXTRA_NAME, env=env)
        for proc in started.values():
            proc.wait_ready()
        yield started
    finally:
        for proc in started.values():
            proc.stop()


def _authority(url: str) -> str:
    return str(httpx.URL(url).netloc, "ascii")


class Route:
    """One request of a route kind, sent with chosen ``Host``/``Origin`` headers."""

    def __init__(self, name: str, method: str, path: str, **kw):
        self.name, self.method, self.path, self.kw = name, method, path, kw

    def send(self, client: httpx.Client, base: str, headers: dict[str, str]) -> httpx.Response:
        kw = dict(self.kw)
        kw["headers"] = {**kw.get("headers", {}), **headers}
        if self.name == "queue-data":  # an SSE stream: the status and headers are enough
            with client.stream(self.method, base + self.path, **kw) as resp:
                if resp.status_code != 200:
                    resp.read()
                    return resp
                return httpx.Response(200, headers=resp.headers, content=b"")
        return client.request(self.method, base + self.path, **kw)


def _routes(uploaded: str) -> list[Route]:
    session = uuid.uuid4().hex
    patched = sorted(gradio_patch.patched_assets())  # the Gradio scripts anycode answers itself (issue 32)
    return [
        Route("page", "GET", "/"),
        Route("patched-script", "GET", "/assets/" + (patched[0] if patched else "index.html")),
        Route("config", "GET", "/config"),
        Route("api-info", "GET", "/gradio_api/info"),
        Route("queue-join", "POST", "/gradio_api/queue/join",
              json={"data": [], "fn_index": 0, "session_hash": session, "event_data": None,
                    "trigger_id": None}),
        Route("queue-data", "GET", f"/gradio_api/queue/data?session_hash={session}"),
        Route("file", "GET", f"/gradio_api/file={uploaded}"),
        Route("upload", "POST", "/gradio_api/upload",
              files={"files": ("notes.txt", b"private conversation text", "text/plain")}),
    ]


ROUTE_NAMES = ["page", "patched-script", "config", "api-info", "queue-join", "queue-data", "file", "upload"]


@pytest.fixture(scope="module")
def served(apps):
    """Per bind address: (base URL, own authority, routes) with a file uploaded the normal way."""
    out = {}
    for bind, proc in apps.items():
        base = proc.url.rstrip("/")
        own = _authority(proc.url)
        with httpx.Client(timeout=15, trust_env=False) as client:
            resp = client.post(base + "/gradio_api/upload", headers={"Host": own},
                               files={"files": ("seed.txt", b"seed", "text/plain")})
            assert resp.status_code == 200, resp.text
            uploaded = resp.json()[0]
        out[bind] = (base, own, {r.name: r for r in _routes(uploaded)})
    return out


def _port(authority: str) -> str:
    return authority.rsplit(":", 1)[1]


@pytest.fixture(params=BINDS)
def bind(request, served):
    if request.param not in served:
        pytest.skip("this machine has no IPv6 loopback")
    return request.param


class TestDnsRebinding:
    """A web page whose name an attacker resolves to 127.0.0.1 sends its own name as ``Host``: the
    app must not answer it (it would read every conversation and drive the file tools)."""

    @pytest.mark.parametrize("route", ROUTE_NAMES)
    def test_forged_host_is_refused_on_every_route(self, served, bind, route):
        base, own, routes = served[bind]
        with httpx.Client(timeout=15, trust_env=False) as client:
            good = routes[route].send(client, base, {"Host": own})
            assert good.status_code < 500 and REFUSED not in good.text, (route, good.status_code)
            for forged in (f"evil.example:{_port(own)}", "evil.example", "127.0.0.1.evil.example",
                           f"localhost.evil.example:{_port(own)}"):
                bad = routes[route].send(client, base, {"Host": forged})
                assert bad.status_code == 403, (route, forged, bad.status_code)
                assert REFUSED in bad.text
                assert "private conversation" not in bad.text and "seed" not in bad.text

    def test_names_the_app_is_served_under_are_accepted(self, served, bind):
        base, own, routes = served[bind]
        port = _port(own)
        names = ["localhost", "127.0.0.1", "[::1]", EXTRA_NAME, ENV_NAME, "LOCALHOST"]
        with httpx.Client(timeout=15, trust_env=False) as client:
            for name in names + [own.rsplit(":", 1)[0]]:
                resp = routes["config"].send(client, base, {"Host": f"{name}:{port}"})
                assert resp.status_code == 200, (name, resp.status_code, resp.text[:200])

    def test_another_loopback_address_is_not_the_bound_one(self, served):
        base, own, routes = served["127.0.0.2"]
        with httpx.Client(timeout=15, trust_env=False) as client:
            resp = routes["config"].send(client, base, {"Host": f"127.0.0.3:{_port(own)}"})
        assert resp.status_code == 403


class TestCrossOrigin:
    """A page on another site (or another local port) must not read or drive the app: Gradio
    reflects any ``Origin`` with credentials allowed when bound to 127.0.0.2 or ::1."""

    @pytest.mark.parametrize("route", ROUTE_NAMES)
    def test_foreign_origin_is_refused_without_cors_headers(self, served, bind, route):
        base, own, routes = served[bind]
        foreign = ["http://evil.example", f"http://evil.example:{_port(own)}", "null",
                   f"http://localhost:{int(_port(own)) + 1}", f"https://{EXTRA_NAME}.evil.example"]
        with httpx.Client(timeout=15, trust_env=False) as client:
            for origin in foreign:
                resp = routes[route].send(client, base, {"Host": own, "Origin": origin})
                assert resp.status_code == 403, (route, origin, resp.status_code)
                assert not [h for h in resp.headers if h.lower().startswith("access-control-")]

    def test_preflight_from_another_site_is_refused(self, served, bind):
        base, own, _ = served[bind]
        with httpx.Client(timeout=15, trust_env=False) as client:
            for path in ("/gradio_api/queue/join", "/config", "/gradio_api/upload"):
                resp = client.options(base + path, headers={
                    "Host": own, "Origin": "http://evil.example",
                    "Access-Control-Request-Method": "POST",
                    "Access-Control-Request-Headers": "content-type"})
                assert resp.status_code == 403, path
                assert "access-control-allow-origin" not in resp.headers
                assert "access-control-allow-credentials" not in resp.headers

    @pytest.mark.parametrize("route", ["config", "queue-join", "upload"])
    def test_same_origin_requests_work_and_carry_no_cors_grant(self, served, bind, route):
        base, own, routes = served[bind]
        with httpx.Client(timeout=15, trust_env=False) as client:
            resp = routes[route].send(client, base, {"Host": own, "Origin": f"http://{own}"})
        assert resp.status_code == 200, (route, resp.status_code, resp.text[:200])
        assert not [h for h in resp.headers if h.lower().startswith("access-control-")]


class TestContentSecurityPolicy:
    """A URL in a message must never be fetched by the page: the policy allows the app's own
    origin (and inline data) only, on the page and on every other response."""

    def test_every_response_carries_the_policy(self, served, bind):
        base, own, routes = served[bind]
        with httpx.Client(timeout=15, trust_env=False) as client:
            for name in ("page", "patched-script", "config", "api-info", "file"):
                resp = routes[name].send(client, base, {"Host": own})
                policy = resp.headers.get("content-security-policy", "")
                directives = dict((d.split(" ", 1) + [""])[:2] for d in policy.split("; "))
                for needed in ("img-src", "media-src", "style-src", "font-src", "frame-src",
                               "connect-src", "base-uri"):
                    assert needed in directives, (name, needed)
                    assert "*" not in directives[needed] and "http" not in directives[needed]
                    assert directives[needed].startswith("'self'"), (name, needed)
                assert directives["object-src"] == "'none'"
                assert directives["frame-ancestors"] == "'none'"
                assert resp.headers.get("referrer-policy") == "no-referrer"
        assert policy == security.CONTENT_SECURITY_POLICY


class TestUploadsArePrivate:
    """An upload (a ChatGPT export to import) holds conversation text: it must not land in a
    folder other users of the machine can read (Gradio's shared temp cache, 0755 folders)."""

    def test_uploaded_file_is_0600_in_0700_folders_of_the_run(self, served):
        base, own, _ = served["127.0.0.1"]
        with httpx.Client(timeout=15, trust_env=False) as client:
            resp = client.post(base + "/gradio_api/upload", headers={"Host": own},
                               files={"files": ("conversations.json", b"[]", "application/json")})
        path = Path(resp.json()[0])
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        folder = path.parent
        while not folder.name.startswith("anycode-web-"):
            assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
            assert folder != folder.parent, f"{path} is not in the app's private folder"
            folder = folder.parent
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        assert folder.name.startswith(f"anycode-web-") and os.access(folder, os.W_OK)


class TestHostRules:
    """The rules themselves, without a server: a name that slips through is a rebinding hole; a
    user's own name refused makes the app unusable behind it."""

    def test_wildcard_bind_accepts_addresses_never_names(self):
        policy = security.HostPolicy.for_server("0.0.0.0", ["box.lan"])
        assert policy.allows("192.168.1.20") and policy.allows("box.lan")
        assert not policy.allows("evil.example") and not policy.allows("192.168.1.20.evil.example")
        narrow = security.HostPolicy.for_server("127.0.0.1")
        assert not narrow.allows("192.168.1.20") and narrow.allows("::ffff:127.0.0.1")

    def test_origin_must_be_the_requested_host_and_port(self):
        assert security.same_origin("http://127.0.0.1:7860", "127.0.0.1:7860", "http")
        assert security.same_origin("https://box.lan", "box.lan", "https")
        assert not security.same_origin("http://127.0.0.1:7861", "127.0.0.1:7860", "http")
        assert not security.same_origin("null", "127.0.0.1:7860", "http")
        assert not security.same_origin("http://localhost:7860", "127.0.0.1:7860", "http")

    def test_allowed_host_values_are_bare_names(self, tmp_path):
        assert security.parse_allowed_hosts(["a.lan, B.lan", "[::2]"]) == ["a.lan", "b.lan", "::2"]
        for bad in ("http://a.lan", "a.lan:8080", "a.lan/x"):
            with pytest.raises(ValueError):
                security.parse_allowed_hosts([bad])
        from webui.cli import launcher as cli

        assert cli.main(["--allowed-host", "http://a.lan", "--no-browser", "--project",
                         str(tmp_path), "--data-dir", str(tmp_path / "d")]) == 2
