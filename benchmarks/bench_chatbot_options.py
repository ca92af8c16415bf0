"""What each of the chat's per-message controls costs a render, in Chromium (issue 32).

Opening a chat and switching its version both render the same 200 messages in Gradio's
``Chatbot``; the bare app of ``bench_browser`` renders them with Gradio's defaults, anycode with a
copy button, an edit button on the user's messages and a menu (Branch, Regenerate, Rewind) on
every message. This bench isolates that difference: one small Gradio page per ``Chatbot``
configuration (nothing else on it but two buttons), all served by this process, each timed in
turn — a click showing 200 messages (those of :func:`benchmarks.bench_browser.conversation`), until
the last is on screen, after the page showed 10 — interleaved, medians of ``--runs``.

Run as ``python -m benchmarks.bench_chatbot_options [--runs 5] [--css]`` (``--css``: with anycode's
style sheets on every page). Prints a Markdown table: the click's wall time, the main thread's
long tasks (over 50 ms) in the 1.2 s after it, and the ratio to the bare ``Chatbot``.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from webui.server import offline  # noqa: F401,E402  (no telemetry, no remote assets: as anycode)

# name → the Chatbot's options; the last is anycode's chat (webui.gui.app.build_chat)
VARIANTS: dict[str, dict] = {
    "bare (Gradio's defaults)": {},
    "+ copy": {"buttons": ["copy"]},
    "+ copy, edit": {"buttons": ["copy"], "editable": "user"},
    "+ copy, menu on replies": {"buttons": ["copy"], "feedback_options": ["Branch", "Regenerate", "Rewind"]},
    "+ copy, menu on every message": {"buttons": ["copy"], "like_user_message": True,
                                      "feedback_options": ["Branch", "Regenerate", "Rewind"]},
    "anycode (copy, edit, menu on every message)": {
        "buttons": ["copy"], "editable": "user", "like_user_message": True, "group_consecutive_messages": False,
        "feedback_options": ["Branch", "Regenerate", "Rewind"]},
}


def serve(css: str) -> dict[str, str]:
    """Start one page per :data:`VARIANTS` entry on 127.0.0.1; name → its URL."""
    import gradio as gr

    from benchmarks.bench_browser import conversation
    from tests.support.chromium import _free_port

    big, small = conversation(1000)[-200:], conversation(10)
    urls = {}
    for name, options in VARIANTS.items():
        with gr.Blocks() as demo:
            chat = gr.Chatbot(elem_id="ac-chat", height="80vh", layout="bubble", **options)
            show_big = gr.Button("200 messages", elem_id="big")
            show_small = gr.Button("10 messages", elem_id="small")
            show_big.click(lambda: big, None, chat)
            show_small.click(lambda: small, None, chat)
            if "feedback_options" in options or "editable" in options:
                chat.like(lambda: None, None, None)  # the menu and the edit need a listener
        port = _free_port()
        demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                    ssr_mode=False, css=css)
        urls[name] = f"http://127.0.0.1:{port}/"
    return urls


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--css", action="store_true", help="anycode's style sheets on every page")
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    from benchmarks.bench_browser import BUSY_JS, BUSY_SINCE_JS
    from tests.support.chromium import BROWSER_ARGS, CHROMIUM

    css = ""
    if args.css:
        from webui.gui.app import CSS_FILES
        from webui.gui.assets import asset_text

        css = "\n".join(asset_text(n) for n in CSS_FILES)
    urls = serve(css)
    wall: dict[str, list[float]] = {n: [] for n in urls}
    busy: dict[str, list[float]] = {n: [] for n in urls}
    last = "Answer 499"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=BROWSER_ARGS)
        pages = {}
        for name, url in urls.items():
            pg = browser.new_page(viewport={"width": 1360, "height": 860})
            pg.set_default_timeout(120_000)
            pg.goto(url)
            pg.locator("#big").wait_for()
            pages[name] = pg
        for _ in range(args.runs):
            for name, pg in pages.items():
                pg.locator("#small").click()
                pg.locator("[data-testid=bot]", has_text=last).first.wait_for(state="detached")
                pg.wait_for_timeout(800)  # idle before it is timed
                start = pg.evaluate(BUSY_JS)
                t = time.perf_counter()
                pg.locator("#big").click()
                pg.locator("[data-testid=bot]", has_text=last).first.wait_for()
                wall[name].append(time.perf_counter() - t)
                pg.wait_for_timeout(1200)
                busy[name].append(pg.evaluate(BUSY_SINCE_JS, start))
        browser.close()
    floor = statistics.median(wall[next(iter(wall))])
    print(f"# The chat's per-message controls: a click showing 200 messages (medians of {args.runs}"
          f"{', with anycode CSS' if args.css else ''})\n")
    print("| Chatbot | click → last message | long tasks | ÷ bare |")
    print("|---|---:|---:|---:|")
    for name in urls:
        w = statistics.median(wall[name])
        print(f"| {name} | {w * 1000:.0f} ms | {statistics.median(busy[name]):.0f} ms | {w / floor:.2f}× |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
