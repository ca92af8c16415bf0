"""What showing chat text as written costs the server (issue 18, defect 1).

Run as ``python -m benchmarks.bench_chat_text``. For replies of growing size (a realistic mix of
prose, inline HTML, code spans, fenced code and an HTML block), measures:

- ``reply()``: one whole reply rendered for the Chatbot the first time (opening a stored
  conversation), and again (the chat is re-rendered after every send; replies up to 32 KiB are
  kept in a cache);
- streamed: ``StreamedReply.render`` on the reply growing by 1-30 characters at a time, as the
  send loop calls it (about every 40 ms): the mean and the worst single update;
- ``literal()``: a user's message of the same size.

Prints a Markdown table (milliseconds, medians of ``--runs``).
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from webui.text import chat_text  # noqa: E402
from webui.text.chat_text import StreamedReply, literal, reply  # noqa: E402

PARAGRAPH = ("Here is `List<T>` and a <b>tag</b>, some **Markdown** and a [link](http://example.com).\n\n"
             "```python\nfor i in range(10):\n    if i < 5:\n        print(i)\n```\n\n"
             "<div class=\"note\">\nraw <i>block</i>\n</div>\n\n- item <kbd>Ctrl</kbd>\n\n")


def _ms(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def _streamed(text: str) -> tuple[float, float]:
    """(mean, worst) milliseconds of one StreamedReply.render while ``text`` streams in."""
    rnd, streamed, pos, times = random.Random(7), StreamedReply(), 0, []
    cached, chat_text.reply = chat_text.reply, chat_text._reply  # the text repeats: no cache hits
    try:
        while pos < len(text):
            pos = min(len(text), pos + rnd.randint(1, 30))
            start = time.perf_counter()
            streamed.render(text[:pos])
            times.append((time.perf_counter() - start) * 1000)
    finally:
        chat_text.reply = cached
    return statistics.mean(times), max(times)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    print("| reply size | reply(), first | reply(), again | streamed update, mean | streamed update, worst | literal() |")
    print("|---:|---:|---:|---:|---:|---:|")
    for repeat in (1, 10, 50, 200):
        text = PARAGRAPH * repeat
        whole = _ms(lambda: chat_text._reply(text), args.runs)
        reply(text)
        again = _ms(lambda: reply(text), args.runs)
        mean, worst = _streamed(text)
        lit = _ms(lambda: literal(text), args.runs)
        print(f"| {len(text) / 1024:.1f} KiB | {whole:.1f} ms | {again:.2f} ms | {mean:.2f} ms | {worst:.1f} ms "
              f"| {lit:.2f} ms |")


if __name__ == "__main__":
    main()
