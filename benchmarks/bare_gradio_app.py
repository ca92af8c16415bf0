"""The floor of ``bench_browser`` (issue 32): a bare Gradio 6 Blocks app doing what anycode's page
does, with nothing else — a column of buttons (one per conversation) beside a ``Chatbot``; a
click shows that conversation's latest 200 messages (what anycode shows of a long one); Enter
streams a reply from the same OpenAI-compatible server into the open chat.

Run as ``python -m benchmarks.bare_gradio_app --port P --base-url URL`` (the fake server's
``/v1`` URL); prints ``READY <url>`` once it serves. The messages are those of
:func:`benchmarks.bench_browser.conversation` so both apps render the same Markdown and code.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from webui.server import offline  # noqa: F401,E402  (no telemetry, no remote assets: as anycode)

import gradio as gr  # noqa: E402
from openai import OpenAI  # noqa: E402

SHOWN = 200  # the latest messages shown, as anycode's CHAT_WINDOW
BUTTONS = 30  # sidebar rows: anycode shows its first page of the list


def build(base_url: str, sizes: list[int]) -> gr.Blocks:
    """The bare app: one button per conversation of ``sizes`` messages, plus ``BUTTONS`` small
    ones; a ``Chatbot`` and a ``Textbox`` whose Enter streams from ``base_url``."""
    from benchmarks.bench_browser import conversation

    client = OpenAI(base_url=base_url, api_key="sk-test", max_retries=0)
    chats = {f"Conversation of {n:,} messages": conversation(n)[-SHOWN:] for n in sizes}
    with gr.Blocks(title="bare", fill_height=True) as demo:
        with gr.Row():
            with gr.Column(scale=1, elem_id="bare-list"):
                buttons = [gr.Button(title, elem_classes="bare-row") for title in chats]
                for i in range(BUTTONS - len(buttons)):
                    gr.Button(f"Small chat {i}", elem_classes="bare-row")
            with gr.Column(scale=4):
                chat = gr.Chatbot(elem_id="bare-chat", height="80vh", layout="bubble")
                box = gr.Textbox(elem_id="bare-input", show_label=False, submit_btn=True)
        for button, title in zip(buttons, chats):
            button.click(lambda title=title: chats[title], None, chat)

        def plain(message: dict) -> dict:
            # the Chatbot gives back its own message dicts (metadata, options; content as parts)
            content = message.get("content")
            if isinstance(content, list):
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
            return {"role": message["role"], "content": str(content or "")}

        def send(text, history):
            history = [plain(m) for m in history or []] + [{"role": "user", "content": text}]
            reply = {"role": "assistant", "content": ""}
            stream = client.chat.completions.create(model="gpt-4o-mini", messages=history[-20:], stream=True)
            for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    reply["content"] += chunk.choices[0].delta.content
                    yield "", history + [reply]
            yield "", history + [reply]

        box.submit(send, [box, chat], [box, chat])
    return demo


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--sizes", default="10,1000", help="conversation sizes, comma-separated")
    args = ap.parse_args(argv)
    demo = build(args.base_url, [int(s) for s in args.sizes.split(",")])
    demo.launch(server_name="127.0.0.1", server_port=args.port, prevent_thread_lock=True, quiet=True,
                ssr_mode=False, footer_links=[])
    print(f"READY http://127.0.0.1:{args.port}/", flush=True)
    demo.block_thread()
    return 0


if __name__ == "__main__":
    sys.exit(main())
