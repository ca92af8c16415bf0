"""The web UI's string catalogue (webui/locales) and how a request's language and time zone are chosen."""
from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from babel import Locale

from webui import i18n
from webui.text import timefmt
from webui.i18n import t, tn

WEBUI = Path(i18n.__file__).parent.parent  # webui/ (the catalogue is webui/i18n/__init__.py)
UTC = ZoneInfo("UTC")
SHANGHAI = ZoneInfo("Asia/Shanghai")


def english_fragments() -> list[tuple[str, str]]:
    """``(key, fragment)``: the literal pieces of every English catalogue string that the
    Chinese catalogue words differently, markdown and placeholders taken out; pieces shorter
    than 4 letters are left out (they would match inside other words or names)."""
    cats = i18n.catalogues()
    out = []
    for key, en in cats["en"].items():
        zh = cats["zh-CN"][key]
        for form in (en.values() if isinstance(en, dict) else [en]):
            if form in (zh.values() if isinstance(zh, dict) else [zh]):
                continue
            text = re.sub(r"[*#`]", "", form)
            for piece in re.split(r"\{[^}]*\}", text):
                piece = piece.strip(" .,;:()…—-\n")
                if sum(ch.isalpha() for ch in piece) >= 4:
                    out.append((key, piece))
    return out


def english_left(text: str) -> list[tuple[str, str]]:
    """The English catalogue pieces found in ``text`` (as whole words, case-sensitive)."""
    return [(key, piece) for key, piece in english_fragments()
            if re.search(r"(?<![A-Za-z])" + re.escape(piece) + r"(?![A-Za-z])", text)]


class _Request:
    """What webui.i18n reads of a gr.Request: cookies and headers."""

    def __init__(self, cookies=None, accept=""):
        self.cookies = cookies or {}
        self.headers = {"accept-language": accept} if accept else {}


class TestCatalogue:
    """Guards against a string missing in one language (English shown in the Chinese UI, or a
    KeyError), a translation that drops or renames a placeholder (a crash or a "{n}" on screen),
    and a key used in the code but absent from the catalogue."""

    def test_every_key_in_every_language(self):
        cats = i18n.catalogues()
        assert set(cats) >= {"en", "zh-CN"}
        english = set(cats["en"])
        for code, cat in cats.items():
            assert set(cat) == english, (code, sorted(english ^ set(cat)))
            for key, value in cat.items():
                assert value, (code, key)

    def test_placeholders_match_english(self):
        cats = i18n.catalogues()
        for key, en in cats["en"].items():
            en_forms = en.values() if isinstance(en, dict) else [en]
            wanted = set().union(*(i18n.placeholders(f) for f in en_forms))
            for code, cat in cats.items():
                value = cat[key]
                assert isinstance(value, dict) == isinstance(en, dict), (code, key)
                for form in (value.values() if isinstance(value, dict) else [value]):
                    assert i18n.placeholders(form) == wanted, (code, key, form)

    def test_plural_entries_have_the_forms_the_language_needs(self):
        for code, cat in i18n.catalogues().items():
            needed = set(Locale.parse(code.replace("-", "_")).plural_form.tags) | {"other"}
            for key, value in cat.items():
                if isinstance(value, dict):
                    assert set(value) >= needed, (code, key, needed - set(value))
                    assert set(value) <= set(i18n.PLURAL_CATEGORIES), (code, key)

    def test_keys_are_flat_names(self):
        # svelte-i18n (Gradio's frontend) reads a dot in a key as nesting
        for key in i18n.catalogues()["en"]:
            assert re.fullmatch(r"[a-z][a-z0-9_]*", key), key

    def test_every_key_the_code_uses_exists(self):
        used = set()
        pattern = re.compile(r"""\b(?:t|tn|tr|Msg|i18n\.t|i18n\.tn|i18n\.Msg|i18n_ui\.tr)\(\s*["']([a-z0-9_]+)["']\s*[,)]""")
        for path in WEBUI.rglob("*.py"):
            used |= set(pattern.findall(path.read_text(encoding="utf-8")))
        assert used, "no catalogue key found in webui/**/*.py"
        missing = used - set(i18n.catalogues()["en"])
        assert not missing, sorted(missing)

    def test_plurals_and_numbers(self):
        assert tn("entries", 1, "en") == "1 entry"
        assert tn("entries", 2, "en") == "2 entries"
        assert tn("entries", 1234, "en") == "1,234 entries"
        assert tn("entries", 2, "zh-CN") == "2 条记录"

    def test_missing_translation_falls_back_to_english(self, monkeypatch):
        cats = {code: dict(cat) for code, cat in i18n.catalogues().items()}
        del cats["zh-CN"]["new_chat"]
        monkeypatch.setattr(i18n, "catalogues", lambda: cats)
        assert t("new_chat", "zh-CN") == "New chat"
        with pytest.raises(KeyError):
            t("no_such_key_anywhere", "en")

    def test_msg_reads_english_and_translates(self):
        msg = i18n.Msg("no_reply_notice")
        assert msg == "No reply was saved for the last message."
        assert t(msg, "zh-CN") == i18n.catalogues()["zh-CN"]["no_reply_notice"]
        assert i18n.localize("an error's own sentence") == "an error's own sentence"
        with i18n.using("zh-CN"):
            assert i18n.localize(msg) == i18n.catalogues()["zh-CN"]["no_reply_notice"]


class TestBoldRendersInEveryLanguage:
    """Guards against literal asterisks on screen: CommonMark does not close ``**`` after CJK
    punctuation ("**已归档。**它…") when a letter follows directly, so a Chinese notice showed
    ``**这个对话已归档。**`` instead of bold text."""

    def test_no_catalogue_string_leaves_asterisks_in_the_rendered_page(self):
        from markdown_it import MarkdownIt
        md = MarkdownIt("commonmark")
        for code, cat in i18n.catalogues().items():
            for key, value in cat.items():
                for form in (value.values() if isinstance(value, dict) else [value]):
                    if "**" in form:
                        assert "**" not in md.render(form), (code, key, form)


class TestLanguageChoice:
    """Guards against the UI ignoring the browser's language, the page setting or ANYCODE_LANG,
    or picking them in the wrong order."""

    def test_accept_language_by_quality(self):
        assert i18n.parse_accept_language("en;q=0.5, zh-CN, fr;q=0.8, *;q=0.1") == ["zh-CN", "fr", "en"]
        assert i18n.parse_accept_language("") == []

    def test_matching_tags(self):
        assert i18n.match("zh-CN") == "zh-CN"
        assert i18n.match("zh_cn") == "zh-CN"
        assert i18n.match("zh-Hans-CN") == "zh-CN"
        assert i18n.match("en-US") == "en"
        assert i18n.match("fr") is None
        assert i18n.negotiate(["fr-FR", "zh-TW", "en"]) == "zh-CN"

    def test_order_setting_env_browser_header(self, monkeypatch):
        monkeypatch.delenv("ANYCODE_LANG", raising=False)
        assert i18n.request_lang(_Request(accept="zh-CN,zh;q=0.9")) == "zh-CN"
        assert i18n.request_lang(_Request(accept="de-DE")) == "en"
        # navigator.languages (cookie) before the header
        assert i18n.request_lang(_Request({"anycode_nav": "en-US,en"}, accept="zh-CN")) == "en"
        monkeypatch.setenv("ANYCODE_LANG", "zh-CN")
        assert i18n.request_lang(_Request({"anycode_nav": "en-US"})) == "zh-CN"
        assert i18n.request_lang(None) == "zh-CN"
        # the page's own setting wins over ANYCODE_LANG; "auto" follows the rest
        assert i18n.request_lang(_Request({"anycode_lang": "en", "anycode_nav": "zh-CN"})) == "en"
        assert i18n.request_lang(_Request({"anycode_lang": "auto", "anycode_nav": "en-US"})) == "zh-CN"
        monkeypatch.setenv("ANYCODE_LANG", "klingon")
        assert i18n.request_lang(_Request({"anycode_nav": "zh-CN"})) == "zh-CN"

    def test_browser_lang_is_what_gradio_shows(self):
        assert i18n.browser_lang(_Request({"anycode_nav": "zh-CN,en"})) == "zh-CN"
        assert i18n.browser_lang(_Request({"anycode_nav": "fr-FR,zh-CN"})) == "en"
        assert i18n.browser_lang(_Request(accept="zh-TW,en;q=0.5")) == "zh-CN"


class TestDatesInTheBrowsersZone:
    """Guards against date groups and times that follow the server's clock instead of the
    browser's (a chat from 23:00 UTC is "Yesterday" on a server in UTC but "Today" in Shanghai
    the next morning), and hand-written English time words in the Chinese UI."""

    def test_group_follows_the_browser_zone(self):
        now = dt.datetime(2026, 11, 30, 1, 30, tzinfo=UTC).timestamp()  # 09:30 in Shanghai
        chat = dt.datetime(2026, 11, 29, 23, 0, tzinfo=UTC).timestamp()  # 07:00 in Shanghai
        assert timefmt.group_key(chat, now, UTC) == "group_yesterday"
        assert timefmt.group_key(chat, now, SHANGHAI) == "group_today"
        with i18n.using("zh-CN", "Asia/Shanghai"):
            assert timefmt.group_label(chat, now) == "今天"
        with i18n.using("en", "UTC"):
            assert timefmt.group_label(chat, now) == "Yesterday"

    def test_relative_times_in_chinese(self):
        now = 1_800_000_000.0
        with i18n.using("zh-CN", "Asia/Shanghai"):
            assert timefmt.relative_time(now - 5, now) == "刚刚"
            assert timefmt.relative_time(now - 300, now) == "5分钟前"
            assert timefmt.relative_time(now - 3 * 3600, now) == "3小时前"
            assert timefmt.relative_time(now - 40 * 86400, now) == "2026年12月6日"
        with i18n.using("en", "UTC"):
            assert timefmt.relative_time(now - 40 * 86400, now) == "Dec 6, 2026"

    def test_untitled_label_in_language_and_zone(self):
        created = dt.datetime(2026, 11, 29, 23, 0, tzinfo=UTC).timestamp()
        with i18n.using("zh-CN", "Asia/Shanghai"):
            assert timefmt.session_label(None, created) == "会话 2026-11-30 07:00"
            assert timefmt.session_label("  ", None) == "新对话"
        with i18n.using("en", "UTC"):
            assert timefmt.session_label("", created) == "Session 2026-11-29 23:00"
            assert timefmt.session_label("My title", created) == "My title"

    def test_core_fallback_title_is_shown_localised(self):
        # core stores its English "Session …" as the title when the title model fails
        created = dt.datetime(2026, 11, 29, 23, 0, tzinfo=UTC).timestamp()
        with i18n.using("zh-CN", "Asia/Shanghai"):
            assert timefmt.session_label("Session 2026-11-29 23:00", created, "fallback") == "会话 2026-11-30 07:00"
            assert timefmt.session_label("Session notes", created, "user") == "Session notes"

    def test_unknown_zone_falls_back_to_the_server(self):
        with i18n.using("en", "Mars/Olympus_Mons"):
            assert i18n.zone() is None


class TestCoreErrorsInTheUILanguage:
    """Guards against core's English error sentences (model unreachable, changed elsewhere) in
    the Chinese UI, and against a translated error losing what the English one said."""

    def test_common_errors_translated_with_their_details(self):
        from core import errors as E
        from webui.text.error_text import describe

        unreachable = E.ModelUnreachable("Could not reach the model server at http://127.0.0.1:9; check that "
                                         "it is running and that OPENAI_BASE_URL is right.")
        auth = E.ModelAuthError("The model server refused the API key (HTTP 401); check OPENAI_API_KEY.")
        auth.status_code = 401
        with i18n.using("zh-CN"):
            assert describe(E.StaleChange("title", "a", "b")).startswith("这个对话的标题已在别处被修改")
            assert "http://127.0.0.1:9" in describe(unreachable) and "无法连接模型服务器" in describe(unreachable)
            assert "HTTP 401" in describe(auth) and "API 密钥" in describe(auth)
            assert "abc123" in describe(E.SessionNotFound("abc123"))
            assert describe(E.AnycodeError("an error of its own")) == "an error of its own"
        with i18n.using("en"):
            assert describe(unreachable) == str(unreachable)
            assert describe(auth) == str(auth)
            assert describe(E.StaleChange("title", "a", "b")) == str(E.StaleChange("title", "a", "b"))


class TestServerRenderedTextInChinese:
    """Guards against English left in Chinese text the server renders for states a browser test
    cannot reach cheaply (a summary divider, a cut-off reply, a failing mirror, compaction
    progress, an import summary, the memory toast)."""

    def test_no_english_catalogue_text(self):
        from types import SimpleNamespace

        from webui.chat import compaction as compaction_ui
        from webui.chat import handlers
        from webui.chat import imports as import_panel
        from webui.chat import memory as memory_panel
        from webui.render import rows as render

        now = 1_800_000_000.0

        def shown(row) -> str:  # what a chat row shows: its text, step title, option labels
            meta = row.get("metadata") or {}
            return " ".join([row["content"], meta.get("title", ""), *(o["label"] for o in row.get("options", []))])

        def text_of(markup: str) -> str:  # an HTML string's text, attributes left out
            return re.sub(r"<[^>]+>", " ", markup)

        with i18n.using("zh-CN", "Asia/Shanghai"):
            pieces = {
                "divider": shown(render.summary_divider({"trigger": "manual", "tokens_before": 5000,
                                                       "tokens_after": 800, "summary": "总结"})),
                "cut off": shown(render.cut_off_row("length", last=True)),
                "tool step": shown(render.tool_step("c1", "write_file", "{}", "结果", is_error=True)),
                "mirror": text_of(handlers.mirror_status_html({"state": "failing", "pending_entries": 3,
                                                       "last_error": "连接被拒绝", "last_success_at": now - 300}, now)),
                "mirror busy": text_of(handlers.mirror_status_html({"state": "catching_up", "pending_entries": 1}, now)),
                "progress": shown(compaction_ui.progress_row(1200, 2, 3)),
                "import": import_panel.import_summary(SimpleNamespace(
                    imported=[1], messages=3, appended=2, subagent_records=2, skipped=[], updated=[1], versions=[1],
                    failed=[1], problems=[1, 2])),
                "memory toast": memory_panel.toast_markdown([SimpleNamespace(text="用 pytest")]),
                "sidebar": text_of(render.sidebar_html([("今天", [render.SidebarRow("a", "标题", "刚刚", archived=True)])],
                                                       empty_text="", more=3)),
            }
        left = {name: english_left(text) for name, text in pieces.items()}
        assert not {k: v for k, v in left.items() if v}, left
        assert "用 pytest" in pieces["memory toast"] and "已归档" in pieces["sidebar"]
