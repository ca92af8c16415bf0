"""What the chat page fetches and what the web UI leaves on disk (issue 10, defects 3 and 8), in a
real Chromium against the real launcher. Remote URLs point at a second local HTTP server on
another port that counts every request, so nothing leaves the machine."""
from __future__ import annotations

import os
import stat
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from core.session.entries import header_entry, message_entry, title_entry
from core.session.keys import SessionKey, new_session_id, project_key
from core.stores.jsonl_store import LocalSessionStore
from tests.support.chromium import expect
from tests.support.web_server import app_env, launch

pytestmark = pytest.mark.browser

PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")


class HitCounter:
    """A local HTTP server standing in for "another site": records every request path."""

    def __init__(self):
        hits = self.hits = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 -- http.server's naming
                hits.append(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "image/png")
                self.send_header("Content-Length", str(len(PNG)))
                self.end_headers()
                self.wfile.write(PNG)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def remote_content(o: str) -> tuple[str, str]:
    """(a user message, an assistant reply) naming remote resources on origin ``o`` in every way
    a page can be made to fetch them."""
    user = f"Look: ![user pic]({o}/user-md.png?secret=hunter2) and <img src=\"{o}/user-img.png\">"
    reply = f"""Here is the summary of the file you asked about.

![diagram]({o}/md-image.png?leak=conversation "a title")

![ref image][logo]

<img src="{o}/img-src.png" alt="inline picture">

<img srcset="{o}/srcset-1x.png 1x, {o}/srcset-2x.png 2x" alt="responsive">

<picture><source srcset="{o}/picture-source.webp" type="image/webp"><img src="{o}/picture-img.png" alt="pic"></picture>

<audio controls src="{o}/audio.mp3"></audio>

<video poster="{o}/video-poster.jpg" controls><source src="{o}/video-source.mp4" type="video/mp4"></video>

<div style="background-image: url('{o}/css-url.png'); width: 40px; height: 40px">styled box</div>

<span style="background: image-set('{o}/css-image-set.png' 1x)">set</span>

<style>.ac-x {{ background: url({o}/style-element.png) }} @import "{o}/style-import.css";</style>

Code stays as written: `<img src="{o}/in-code-span.png">`

```html
<img src="{o}/in-fence.png">
```

END-OF-REPLY

[logo]: {o}/md-reference.png
"""
    return user, reply


def _seed(data: Path, project: Path, user: str, reply: str, marker: str) -> str:
    store = LocalSessionStore(data)
    key = SessionKey(project_key(str(project)), new_session_id())
    now = time.time()
    store.append(key, [
        header_entry(key.session_id, key.project_key, str(project), created_at=now - 60),
        message_entry({"role": "user", "content": user + " " + marker}, ts=now - 50),
        message_entry({"role": "assistant", "content": reply}, ts=now - 40),
        title_entry("Remote images", "user", ts=now - 30),
    ])
    return key.session_id


@pytest.fixture
def counter():
    c = HitCounter()
    try:
        yield c
    finally:
        c.close()


def _start(tmp_path: Path, sysdir: Path):
    """Launch the app with its system temp folder at ``sysdir`` (so everything it writes outside
    the data dir can be inspected)."""
    sysdir.mkdir(exist_ok=True)
    env = app_env(tmp_path / "home", TMPDIR=str(sysdir))
    return launch(tmp_path, "127.0.0.1", env=env, project=tmp_path / "project")


class TestRemoteContentIsNotFetched:
    """A reply (or a file the model read) carrying images, srcset, <picture>, <audio>/<video> or
    CSS url() pointing at another site must not make the page request them when the chat is shown
    — the URL itself carries the data out. They must show as links the user can choose to open."""

    def test_chat_full_of_remote_media_makes_no_request(self, tmp_path, counter, page):
        user, reply = remote_content(counter.origin)
        sid = _seed(tmp_path / "data", tmp_path / "project", user, reply, "MARK-1")
        app = _start(tmp_path, tmp_path / "systmp").wait_ready()
        violations: list[str] = []
        page.on("console", lambda m: violations.append(m.text)
                if "Content Security Policy" in m.text else None)
        try:
            page.goto(f"{app.url}?session={sid}")
            bot = page.locator("[data-testid=bot]").last
            expect(bot).to_contain_text("END-OF-REPLY")
            expect(page.locator("[data-testid=user]").first).to_contain_text("MARK-1")
            page.wait_for_timeout(2500)  # lazy loads, media preloads, style recalculation
            bot.scroll_into_view_if_needed()
            page.wait_for_timeout(500)
            assert counter.hits == [], f"the page requested {counter.hits}"
            # every resource is offered as a link to the same URL, none rendered as media
            for name in ("md-image.png?leak=conversation", "img-src.png", "srcset-1x.png",
                         "srcset-2x.png", "picture-source.webp", "picture-img.png", "audio.mp3",
                         "video-poster.jpg", "video-source.mp4", "css-url.png", "css-image-set.png",
                         "style-element.png", "md-reference.png"):
                link = bot.locator(f'a[href="{counter.origin}/{name}"]')
                expect(link).to_have_count(1)
                expect(link).to_be_visible()
                if name != "md-reference.png":  # a reference keeps its text: the mark is before it
                    expect(link).to_contain_text("\u2197")
            expect(bot).to_contain_text("\u2197 image: ref image")
            expect(bot.locator('a[href*="md-image.png"]')).to_contain_text("diagram")
            user_row = page.locator("[data-testid=user]").first
            expect(user_row.locator(f'a[href="{counter.origin}/user-md.png?secret=hunter2"]')).to_be_visible()
            expect(user_row.locator(f'a[href="{counter.origin}/user-img.png"]')).to_be_visible()
            # and nothing in the page still names them as something to load
            loading = page.evaluate("""(origin) => [...document.querySelectorAll('*')].filter((e) =>
                ['src', 'srcset', 'poster', 'data', 'background'].some((a) => (e.getAttribute(a) || '').includes(origin))
                || getComputedStyle(e).backgroundImage.includes(origin)).map((e) => e.outerHTML.slice(0, 120))""",
                                    counter.origin)
            assert loading == []
            # code is shown as written
            expect(bot).to_contain_text(f'<img src="{counter.origin}/in-code-span.png">')
            expect(bot).to_contain_text(f'<img src="{counter.origin}/in-fence.png">')
            # nothing was left for the Content-Security-Policy to block
            assert violations == []
            # a link opens only when clicked: then the user chose to go there
            with page.context.expect_page() as opened:
                bot.locator(f'a[href="{counter.origin}/img-src.png"]').click()
            opened.value.wait_for_load_state()
            assert counter.hits[0] == "/img-src.png"  # (the new tab may add /favicon.ico)
        finally:
            app.stop()


def _walk(root: Path) -> list[Path]:
    return [Path(d) / f for d, _dirs, files in os.walk(root) for f in files]


def _holding(root: Path, marker: str) -> list[Path]:
    out = []
    for path in _walk(root):
        try:
            if marker.encode() in path.read_bytes():
                out.append(path)
        except OSError:
            pass
    return out


class TestExportFilesArePrivate:
    """Exports hold the whole conversation: another user on the machine must not read them (they
    were 0644 in 0755 folders of Gradio's shared cache), updates must not pile up copies, no copy
    is written before the user asks for one, and nothing may be left behind once the app stops."""

    def test_export_files_are_0600_in_0700_folders_and_removed(self, tmp_path, page):
        sysdir = tmp_path / "systmp"
        marker = "PRIVATE-MARK-8"
        sid = _seed(tmp_path / "data", tmp_path / "project", "hello", "a private reply", marker)
        app = _start(tmp_path, sysdir).wait_ready()
        try:
            page.goto(f"{app.url}?session={sid}")
            expect(page.locator("[data-testid=bot]").last).to_contain_text("a private reply")
            # Opening a chat writes no copy of it: the files are written when asked for (issue 32)
            assert _holding(sysdir, marker) == [], "an export was written before it was asked for"
            for label in ("Markdown", "JSONL"):
                with page.expect_download() as dl:
                    page.get_by_role("button", name=label).click()
                assert marker in Path(dl.value.path()).read_text()
            self._check_private(sysdir, marker)
            # an update (a rename) re-exports: still one copy of each, the old names gone
            title = page.locator("#ac-title input")
            title.fill("Renamed chat")
            title.press("Enter")
            expect(page.locator("#ac-list")).to_contain_text("Renamed chat")
            with page.expect_download() as dl:
                page.get_by_role("button", name="Markdown").click()
            assert Path(dl.value.suggested_filename).name.startswith("anycode-renamed-chat")
            files = self._check_private(sysdir, marker)
            assert all("renamed-chat" in p.name for p in files), files
        finally:
            assert app.stop() == 0
        assert _holding(sysdir, marker) == [], "conversation text left in the temp folder"
        assert [p for p in sysdir.iterdir() if p.name.startswith("anycode")] == []

    @staticmethod
    def _check_private(sysdir: Path, marker: str) -> list[Path]:
        files = _holding(sysdir, marker)
        assert len(files) == 2, f"one Markdown and one JSONL copy expected: {files}"
        for path in files:
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, (path, oct(path.stat().st_mode))
            folder = path.parent
            while folder != sysdir:
                assert stat.S_IMODE(folder.stat().st_mode) == 0o700, (folder, oct(folder.stat().st_mode))
                folder = folder.parent
        return files
