"""Browser benchmark of the web UI (issue 17): what a person waits for, measured in Chromium.

Run as ``python -m benchmarks.bench_browser`` (needs Debian's ``chromium`` and the ``playwright``
package, like the browser tests). Starts the fake OpenAI server and ``python -m webui`` as
subprocesses on 127.0.0.1 over a generated data dir, then measures:

- click-to-history: from a click on a conversation in the sidebar until its last message is on
  screen, for conversations of 10, 1,000, 5,000, 10,000 and 100,000 messages (the page shows the
  latest messages; earlier ones come on request);
- send-to-first-token: from Enter until the first streamed token is on screen, minus the fake
  server's own time to first token;
- the sidebar with 10,000 sessions: the server's render of the list and the page until it shows;
- the app process's memory (RSS) after opening 50 long conversations.

Prints Markdown tables; options: ``--quick`` (fewer runs), ``--keep`` (keep the data).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.session.entries import encode_entries, header_entry, message_entry, title_entry  # noqa: E402
from core.session.keys import new_session_id, project_key  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
SIZES = (10, 1_000, 5_000, 10_000, 100_000)
TARGETS = {"click 1,000": 0.300, "latest 10,000": 1.0, "latest 100,000": 1.0, "first token": 0.050,
           "sidebar": 0.200}


def _session_bytes(sid: str, pk: str, cwd: str, n: int, t0: float, title: str) -> bytes:
    entries = [header_entry(sid, pk, cwd, created_at=t0), message_entry({"role": "system", "content": "sys"}, ts=t0)]
    i = 0
    while len(entries) - 1 < n:
        entries.append(message_entry({"role": "user", "content": f"Question {i} about the parser, with a "
                                      f"little context so the bubble wraps once or twice."}, ts=t0 + i))
        entries.append(message_entry({"role": "assistant", "content": f"Answer {i}: use `split()` "
                                      "without arguments; it also handles tabs and newlines.\n\n"
                                      "```python\nwords = text.split()\n```"}, ts=t0 + i + 0.5))
        i += 1
    entries.append(title_entry(title, "llm", ts=t0))
    return encode_entries(entries)


def make_data(base: Path, proj: Path, big_proj: Path, quick: bool) -> dict[str, str]:
    """Sessions of SIZES messages in ``proj``; 10,000 small sessions in ``big_proj``. Returns
    title -> session id."""
    ids = {}
    now = time.time()
    for k, (folder, sizes) in enumerate(((proj, SIZES if not quick else SIZES[:4]),)):
        pk = project_key(str(folder))
        d = base / "projects" / pk
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        for j, n in enumerate(sizes):
            sid = new_session_id()
            title = f"Conversation of {n:,} messages"
            (d / f"{sid}.jsonl").write_bytes(_session_bytes(sid, pk, str(folder), n, now - 86400 - j * 3600, title))
            ids[title] = sid
        for j in range(50):  # for the memory figure: 50 long conversations
            sid = new_session_id()
            title = f"Long #{j:02d}."
            (d / f"{sid}.jsonl").write_bytes(_session_bytes(sid, pk, str(folder), 2_000, now - 5 * 86400 - j, title))
            ids[title] = sid
    pk = project_key(str(big_proj))
    d = base / "projects" / pk
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    for j in range(10_000):
        sid = new_session_id()
        (d / f"{sid}.jsonl").write_bytes(_session_bytes(sid, pk, str(big_proj), 2, now - j * 600, f"Small chat {j}"))
    return ids


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer runs, no 100,000-message conversation")
    ap.add_argument("--keep", action="store_true", help="keep the generated data")
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    from tests.test_browser_e2e import BROWSER_ARGS, Proc, _env, _free_port

    runs = 2 if args.quick else 5
    tmp = Path(tempfile.mkdtemp(prefix="anycode-bench-ui-", dir="/tmp"))
    out: list[str] = ["# anycode browser benchmark", ""]
    procs: list[Proc] = []
    checks: list[tuple[str, bool, str]] = []
    try:
        proj, big = tmp / "proj", tmp / "big"
        proj.mkdir()
        big.mkdir()
        data = tmp / "data"
        t0 = time.perf_counter()
        make_data(data, proj, big, args.quick)
        out.append(f"- data generated in {time.perf_counter() - t0:.1f} s; Chromium headless, 1360×860; "
                   f"{os.cpu_count()} cores; medians of {runs} runs")
        out.append("")
        env = _env(tmp / "home")
        fake = Proc([sys.executable, "-m", "tests.fake_openai", "--port", "0"], env, REPO)
        procs.append(fake)
        base_url = fake.wait_for("READY").split()[-1]
        port = _free_port()
        app = Proc([sys.executable, "-m", "webui", "--no-browser", "--port", str(port), "--project", str(proj),
                    "--data-dir", str(data)],
                   _env(tmp / "home", OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=base_url), tmp)
        procs.append(app)
        app.wait_for("anycode is running at", timeout=300)
        url = f"http://127.0.0.1:{port}/"
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=BROWSER_ARGS)
            page = browser.new_page(viewport={"width": 1360, "height": 860})
            page.set_default_timeout(180_000)
            page.goto(url)
            page.locator("#ac-list .ac-session").first.wait_for()

            # --- click to history ---
            rows = []
            sizes = SIZES if not args.quick else SIZES[:4]
            for n in sizes:
                title = f"Conversation of {n:,} messages"
                last = f"Answer {(n - 1) // 2}:"
                times = []
                for _ in range(runs):
                    page.locator("#ac-new").click()
                    page.locator("[data-testid=bot]").first.wait_for(state="detached")
                    t = time.perf_counter()
                    page.locator("#ac-list .ac-session", has_text=title).first.click()
                    page.locator("[data-testid=bot]", has_text=last).first.wait_for()
                    times.append(time.perf_counter() - t)
                shown = page.locator("[data-testid=bot], [data-testid=user]").count()
                rows.append((n, statistics.median(times), shown))
            out.append("## Click to history (latest message on screen)")
            out.append("")
            out.append("| messages | click → last message visible | rows rendered |")
            out.append("|---:|---:|---:|")
            for n, t, shown in rows:
                out.append(f"| {n:,} | {t * 1000:.0f} ms | {shown:,} |")
            out.append("")
            by = {n: t for n, t, _ in rows}
            checks.append(("click → history at 1,000 messages < 300 ms", by[1000] < TARGETS["click 1,000"],
                           f"{by[1000] * 1000:.0f} ms"))
            for n in (10_000, 100_000):
                if n in by:
                    checks.append((f"latest messages of {n:,} visible < 1 s", by[n] < 1.0, f"{by[n] * 1000:.0f} ms"))

            # --- send to first token ---
            fake_base = base_url.removesuffix("/v1")

            def script(text: str) -> None:
                req = urllib.request.Request(fake_base + "/_script", method="POST", data=json.dumps(
                    {"replies": [{"text": text, "chunk": 1000, "delay": 0.1}]}).encode(),
                    headers={"Content-Type": "application/json"})
                urllib.request.urlopen(req, timeout=10).read()

            def fake_ttft() -> float:
                """The fake server's own time to the first content chunk, over plain HTTP."""
                script("Direct reply.")
                body = json.dumps({"model": "gpt-4o-mini", "stream": True,
                                   "messages": [{"role": "user", "content": "hi"}]}).encode()
                req = urllib.request.Request(base_url + "/chat/completions", data=body, method="POST",
                                             headers={"Content-Type": "application/json",
                                                      "Authorization": "Bearer sk-test"})
                t = time.perf_counter()
                with urllib.request.urlopen(req, timeout=30) as resp:
                    for line in resp:
                        if re.search(rb'"content":\s*"[^"]', line):
                            return time.perf_counter() - t
                raise AssertionError("the fake server sent no content")

            firsts, direct = [], []
            page.locator("#ac-new").click()
            for i in range(runs):
                direct.append(fake_ttft())
                script(f"Token{i} and more text after it.")
                box = page.locator("#ac-input textarea")
                box.fill(f"say token {i}")
                t = time.perf_counter()
                box.press("Enter")
                page.locator("[data-testid=bot]", has_text=f"Token{i}").last.wait_for()
                firsts.append(time.perf_counter() - t)
            ui_first = statistics.median(firsts) - statistics.median(direct)
            out.append("## Send to first token")
            out.append("")
            out.append("| Enter → first token on screen | the fake server's own time to first token | the UI's share |")
            out.append("|---:|---:|---:|")
            out.append(f"| {statistics.median(firsts) * 1000:.0f} ms | {statistics.median(direct) * 1000:.0f} ms "
                       f"| {ui_first * 1000:.0f} ms |")
            out.append("")
            checks.append(("UI share of the first token < 50 ms", ui_first < TARGETS["first token"], f"{ui_first * 1000:.0f} ms"))

            # --- sidebar with 10,000 sessions ---
            from core import LocalSessionStore, SessionManager
            from webui import handlers
            from webui.context import WebContext

            store = LocalSessionStore(data, fsync=False)
            ctx = WebContext(manager=SessionManager(store), store=store, project_path=str(big))
            handlers.session_list_html(ctx, ctx.project_key)  # index warm, as in the running app
            server = []
            for _ in range(runs):
                t = time.perf_counter()
                html = handlers.session_list_html(ctx, ctx.project_key)
                server.append(time.perf_counter() - t)
            page2 = browser.new_page(viewport={"width": 1360, "height": 860})
            app2_port = _free_port()
            app2 = Proc([sys.executable, "-m", "webui", "--no-browser", "--port", str(app2_port), "--project", str(big),
                         "--data-dir", str(data)], _env(tmp / "home", OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=base_url),
                        tmp)
            procs.append(app2)
            app2.wait_for("anycode is running at", timeout=300)
            shows = []
            for _ in range(runs):
                t = time.perf_counter()
                page2.goto(f"http://127.0.0.1:{app2_port}/")
                page2.locator("#ac-list .ac-session").first.wait_for()
                shows.append(time.perf_counter() - t)
            n_rows = page2.locator("#ac-list .ac-session").count()
            t = time.perf_counter()
            page2.locator("#ac-list .ac-more").click()
            page2.locator("#ac-list .ac-session").nth(n_rows).wait_for()
            more = time.perf_counter() - t
            out.append("## Sidebar with 10,000 sessions")
            out.append("")
            out.append("| server renders the list | page load → list shown | rows rendered | next page |")
            out.append("|---:|---:|---:|---:|")
            out.append(f"| {statistics.median(server) * 1000:.1f} ms ({len(html) / 1024:.0f} KiB) | "
                       f"{statistics.median(shows) * 1000:.0f} ms | {n_rows} | {more * 1000:.0f} ms |")
            out.append("")
            checks.append(("sidebar list render (server) with 10,000 sessions < 200 ms",
                           statistics.median(server) < TARGETS["sidebar"], f"{statistics.median(server) * 1000:.1f} ms"))

            # --- memory after 50 long conversations ---
            def rss(pid: int) -> int:
                with open(f"/proc/{pid}/status") as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            return int(line.split()[1]) * 1024
                return 0

            before = rss(app.p.pid)
            for j in range(50):
                page.locator("#ac-list .ac-session", has_text=f"Long #{j:02d}.").first.click()
                page.locator("[data-testid=bot]", has_text="Answer 999:").first.wait_for()
            after = rss(app.p.pid)
            out.append("## Memory of the app process")
            out.append("")
            out.append("| before | after opening 50 conversations of 2,000 messages | growth |")
            out.append("|---:|---:|---:|")
            out.append(f"| {before / 2**20:.0f} MiB | {after / 2**20:.0f} MiB | {(after - before) / 2**20:.0f} MiB |")
            out.append("")
            browser.close()
        out.append("## Targets")
        out.append("")
        out.append("| target | measured | result |")
        out.append("|---|---:|---|")
        for name, ok, val in checks:
            out.append(f"| {name} | {val} | {'PASS' if ok else 'FAIL'} |")
        print("\n".join(out), flush=True)
    finally:
        for p in procs:
            p.stop()
        if args.keep:
            print(f"\n(data kept in {tmp})")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
