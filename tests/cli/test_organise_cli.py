"""Organising many chats from a terminal (issue 31, items 13-17): find by title, pin, tags,
usage and the HTML page, through ``anycode sessions …`` (``main(argv)``) and the launcher's
``--resume``."""
from __future__ import annotations

import pytest

from webui.cli import launcher
from webui.cli.sessions import main
from tests.support.storage import storage_of


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def chat(mgr, proj, title, text="hello"):
    s = mgr.create(proj, title=title)
    mgr.add_messages(s.key, [{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}])
    return s


class TestFindByTitle:
    """Guards against `sessions show "words"` and `anycode --resume "words"` failing on a title
    a person remembers, or silently opening one of several matching chats."""

    def test_show_by_title_words(self, capsys, mgr, proj):
        chat(mgr, proj, "Fix the login bug", "the login fails")
        chat(mgr, proj, "Weekly notes")
        code, out, _ = run(capsys, "show", "login bug", "--project", str(proj))
        assert code == 0 and "the login fails" in out

    def test_several_matches_are_listed_not_opened(self, capsys, mgr, proj):
        a = chat(mgr, proj, "Deploy script")
        b = chat(mgr, proj, "Deploy notes")
        code, out, err = run(capsys, "show", "deploy", "--project", str(proj))
        assert code == 1 and out == ""
        assert "match 2 conversations" in err and a.id in err and b.id in err and "Deploy notes" in err

    def test_an_id_prefix_still_wins(self, capsys, mgr, proj):
        a = chat(mgr, proj, "x", "by id")
        code, out, _ = run(capsys, "show", a.id[:8], "--project", str(proj))
        assert code == 0 and "by id" in out

    def test_no_match_says_so(self, capsys, mgr, proj):
        chat(mgr, proj, "Something")
        code, _, err = run(capsys, "show", "nothing like it", "--project", str(proj))
        assert code == 1 and "No session" in err

    def test_resume_by_title(self, mgr, proj):
        a = chat(mgr, proj, "Refactor the parser")
        chat(mgr, proj, "Refactor the lexer")
        args = launcher.parse_args(["--resume", "parser refactor"])
        assert launcher.initial_session(storage_of(mgr.store), mgr, str(proj), args) == a.id
        with pytest.raises(launcher.CliError) as err:
            launcher.initial_session(storage_of(mgr.store), mgr, str(proj), launcher.parse_args(["--resume", "refactor"]))
        assert "match 2 conversations" in str(err.value) and "Refactor the lexer" in str(err.value)
        with pytest.raises(launcher.CliError, match="No session with id or title"):
            launcher.initial_session(storage_of(mgr.store), mgr, str(proj), launcher.parse_args(["--resume", "zzzz"]))


class TestPinAndTagCommands:
    """Guards against `sessions pin/unpin/tag` writing somewhere the sidebar does not read (a
    version instead of its conversation), `-TAG` being taken for an option, or `list` hiding them."""

    def test_pin_unpin_and_list_marks(self, capsys, mgr, proj):
        a = chat(mgr, proj, "Alpha")
        chat(mgr, proj, "Beta")
        code, out, _ = run(capsys, "pin", a.id[:8], "--project", str(proj))
        assert code == 0 and out.strip() == f"Pinned {a.id}"
        _, out, _ = run(capsys, "list", "--project", str(proj))
        assert "Alpha [pinned]" in out and "Beta [pinned]" not in out
        _, out, _ = run(capsys, "list", "--project", str(proj), "--json")
        import json
        assert {d["title"]: bool(d["pinned"]) for d in json.loads(out)} == {"Alpha": True, "Beta": False}
        run(capsys, "unpin", "alpha", "--project", str(proj))  # by title words too
        _, out, _ = run(capsys, "list", "--project", str(proj))
        assert "[pinned]" not in out

    def test_tag_add_remove_and_filter(self, capsys, mgr, proj):
        a = chat(mgr, proj, "Alpha")
        b = chat(mgr, proj, "Beta")
        code, out, _ = run(capsys, "tag", a.id, "+Work", "urgent", "--project", str(proj))
        assert code == 0 and out.strip() == f"Tags of {a.id}: #work #urgent"
        code, out, _ = run(capsys, "tag", a.id, "-urgent", "+later", "--project", str(proj))
        assert code == 0 and out.strip().endswith("#work #later")
        run(capsys, "tag", b.id, "work", "--project", str(proj))
        _, out, _ = run(capsys, "list", "--project", str(proj), "--tag", "later")
        assert "Alpha" in out and "Beta" not in out and "#work #later" in out
        _, out, _ = run(capsys, "list", "--project", str(proj), "--tag", "WORK")
        assert "Alpha" in out and "Beta" in out
        code, out, _ = run(capsys, "tag", b.id, "--project", str(proj))
        assert code == 0 and out.strip() == f"Tags of {b.id}: #work"
        code, _, err = run(capsys, "tag", b.id, "+a,b", "--project", str(proj))
        assert code == 1 and "cannot hold" in err

    def test_a_version_tags_its_conversation(self, capsys, mgr, proj):
        a = chat(mgr, proj, "Alpha")
        v = mgr.fork(a.key, 0, version=True)
        code, out, _ = run(capsys, "tag", v.id, "+x", "--project", str(proj))
        assert code == 0 and out.strip() == f"Tags of {a.id}: #x"
        assert mgr.pin_and_tags(a.key)[1] == ("x",)
        _, out, _ = run(capsys, "list", "--project", str(proj), "--tag", "x")
        assert a.id[:8] in out and v.id[:8] in out  # the conversation and its version

    def test_tags_in_show_and_exports(self, capsys, mgr, proj, tmp_path):
        import json

        a = chat(mgr, proj, "Alpha")
        mgr.tag(a.key, add=["work"])
        v = mgr.fork(a.key, 0, version=True)  # the version in use: show/export print it
        _, out, _ = run(capsys, "show", a.id, "--project", str(proj))
        assert "- Tags: `work`" in out
        _, out, _ = run(capsys, "show", v.id, "--project", str(proj), "--json")
        assert json.loads(out)["tags"] == ["work"]
        target = tmp_path / "a.md"
        assert run(capsys, "export", a.id, "--project", str(proj), "-o", str(target))[0] == 0
        assert "- Tags: `work`" in target.read_text()

    def test_search_by_tag(self, capsys, mgr, proj):
        import json

        a = chat(mgr, proj, "Alpha", "the deploy failed")
        chat(mgr, proj, "Beta", "the deploy worked")
        mgr.tag(a.key, add=["ops"])
        _, out, _ = run(capsys, "search", "deploy", "--project", str(proj))
        assert "Alpha" in out and "Beta" in out and "#ops" in out
        _, out, _ = run(capsys, "search", "deploy tag:ops", "--project", str(proj))
        assert "Alpha" in out and "Beta" not in out
        _, out, _ = run(capsys, "search", "deploy", "--tag", "OPS", "--project", str(proj), "--json")
        assert [(h["title"], h["tags"]) for h in json.loads(out)] == [("Alpha", ["ops"])]
        _, out, _ = run(capsys, "search", "tag:ops", "--project", str(proj))
        assert "Alpha" in out and "Beta" not in out
        _, out, _ = run(capsys, "search", "tag:nothing", "--project", str(proj))
        assert out.strip() == "No matches."

    def test_minus_tag_is_not_an_option_but_unknown_long_options_are_refused(self, capsys, mgr, proj):
        a = chat(mgr, proj, "Alpha")
        mgr.tag(a.key, add=["x", "y"])
        code, out, _ = run(capsys, "tag", "--project", str(proj), a.id, "-x", "-v")  # -v: verbose, an option
        assert code == 0 and out.strip().endswith(": #y")
        code, out, _ = run(capsys, "tag", a.id, "--project", str(proj), "--", "-y")
        assert code == 0 and out.strip().endswith(": (none)")
        with pytest.raises(SystemExit) as info:
            main(["tag", a.id, "--no-such-option"])
        assert info.value.code == 2


class TestHtmlExport:
    """Guards against the page to share loading anything remote or needing a script to be read,
    showing a reply's raw HTML as markup, losing code highlighting, or being readable by others."""

    def test_self_contained_page(self, capsys, mgr, proj, tmp_path):
        import re
        import stat

        s = mgr.create(proj, title="Parser <fix>")
        mgr.tag(s.key, add=["share"])
        mgr.add_messages(s.key, [
            {"role": "user", "content": "why <script>alert(1)</script>?\n  indented"},
            {"role": "assistant", "content": "Like this:\n\n```python\ndef f():\n    return 1\n```\n\n"
                                             "<img src=x onerror=alert(1)> ![logo](https://example.com/l.png)"},
        ])
        out = tmp_path / "page.html"
        code, _, err = run(capsys, "export", s.id, "--format", "html", "-o", str(out), "--project", str(proj))
        assert code == 0, err
        page = out.read_text(encoding="utf-8")
        assert stat.S_IMODE(out.stat().st_mode) == 0o600
        i = page.lower().find("<script"); assert i < 0, page[i - 80:i + 40]
        assert "<img" not in page and " onerror=" not in page.replace("&lt;img src=x onerror=", "")
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page  # the user's text, as typed
        assert not re.search(r'(src|href)="(https?:)?//[^"]*\.(png|css|js|woff2?)"', page.split("</style>")[1]) or \
            'href="https://example.com/l.png"' in page  # a remote image is a link, never loaded
        assert "<img" not in page
        assert "default-src 'none'" in page and "prefers-color-scheme: dark" in page
        assert 'class="hl"' in page and '<span class="k">def</span>' in page  # highlighted
        assert "<title>Parser &lt;fix&gt;</title>" in page and "#share" in page


class TestUsage:
    """Guards against usage shown without being recorded, an estimate passed off as the server's
    figure, or a cost made up for a model the user set no price for."""

    def test_a_real_reply_records_the_servers_usage(self, capsys, mgr, proj, fake_openai, monkeypatch):
        import json

        import openai

        from core.agent.runner import run_session

        s = mgr.create(proj, title="Counted")
        client = openai.OpenAI(api_key="sk-test", base_url=fake_openai.base_url, max_retries=0)
        run_session(s.key, mgr.store, "hello there", client=client, model="gpt-4o-mini")
        entries = [e for e in mgr.store.load(s.key) if e.get("type") == "usage"]
        assert len(entries) == 1 and entries[0]["prompt_tokens"] > 0 and entries[0]["model"] == "gpt-4o-mini"
        _, out, _ = run(capsys, "show", s.id, "--project", str(proj))
        assert "Usage:" in out and "1 reply" in out and "cost" not in out
        monkeypatch.setenv("ANYCODE_PRICES", "gpt-4o-mini=1000000/2000000")  # 1 per token in, 2 out
        _, out, _ = run(capsys, "show", s.id, "--project", str(proj), "--json")
        u = json.loads(out)["usage"]
        assert u["cost"] == u["prompt_tokens"] + 2 * u["completion_tokens"]
        _, out, _ = run(capsys, "list", "--project", str(proj), "--usage")
        assert "TOKENS" in out and f"{u['total_tokens']:,}" in out
        monkeypatch.setenv("ANYCODE_PRICES", "other-model=1/1")
        _, out, _ = run(capsys, "list", "--project", str(proj), "--usage", "--json")
        assert json.loads(out)[0]["usage"]["cost"] is None  # no price for the model used: no cost

    def test_estimates_are_marked(self):
        from core.session.usage import describe, prices, usage_entry, usage_totals

        t = usage_totals([usage_entry(2, "m", 100, 20, estimated=True), usage_entry(4, "m", 150, 30, estimated=False)])
        assert (t.prompt, t.completion, t.replies, t.estimated) == (250, 50, 2, True)
        assert describe(t, {}) == "~300 tokens (~250 in, ~50 out) in 2 replies"
        assert prices("a=1/2; bad; b=0.5/x") == {"a": (1.0, 2.0)}


class TestSearchOneHitPerConversation:
    """issue 31, item 3 (the CLI half): `anycode sessions search` listed one identical-looking
    block per version of a conversation (versions share their first messages); the page shows
    one per conversation, its version in use, or the version the match is in, labelled."""

    def test_one_block_per_conversation_and_the_other_version_labelled(self, capsys, mgr, proj):
        import json

        a = chat(mgr, proj, "Alpha", "the deploy failed")
        v = mgr.fork(a.key, 0, version=True)  # shares "the deploy failed"; in use now
        mgr.add_messages(v.key, [{"role": "assistant", "content": "the zebra reply"}])
        mgr.add_messages(a.key, [{"role": "user", "content": "a pelican question"}])
        _, out, _ = run(capsys, "search", "deploy", "--project", str(proj))
        assert out.count("Alpha") == 1 and v.id[:8] in out and "version" not in out, out
        _, out, _ = run(capsys, "search", "zebra", "--project", str(proj))
        assert out.count("Alpha") == 1 and v.id[:8] in out and "version" not in out, out
        _, out, _ = run(capsys, "search", "pelican", "--project", str(proj))  # only in version 1
        assert out.count("Alpha") == 1 and a.id[:8] in out and "[in version 1 of 2]" in out, out
        _, out, _ = run(capsys, "search", "deploy", "--project", str(proj), "--json")
        hits = json.loads(out)
        assert [(h["session_id"], h.get("version")) for h in hits] == [(v.id, None)]
        _, out, _ = run(capsys, "search", "pelican", "--project", str(proj), "--json")
        assert [(h["session_id"], h.get("version")) for h in json.loads(out)] == [(a.id, [1, 2])]
