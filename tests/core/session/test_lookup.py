"""Finding a conversation by words of its title (core.session.lookup, SessionManager.find_title)."""
from __future__ import annotations

import pytest

from core.errors import AmbiguousTitle, SessionNotFound
from core.session.lookup import fold_title, title_matches
from core.session.manager import SessionManager
from core.session.models import SessionMeta
from core.stores.jsonl_store import LocalSessionStore


def meta(sid, title):
    return SessionMeta(id=sid, project_key="p", title=title, created_at=0.0, updated_at=0.0, message_count=0)


class TestTitleMatches:
    """Guards against a title query missing the chat a person means (case, word order, width,
    Chinese) or opening one of several when the exact title names one."""

    def test_words_in_any_order_any_case(self):
        rows = [meta("a", "Fix the LOGIN bug"), meta("b", "Login page colours"), meta("c", None)]
        assert [m.id for m in title_matches(rows, "bug  login")] == ["a"]
        assert [m.id for m in title_matches(rows, "login")] == ["a", "b"]
        assert title_matches(rows, "   ") == [] and title_matches(rows, "absent") == []

    def test_exact_title_wins_over_containing_ones(self):
        rows = [meta("a", "Meeting notes"), meta("b", "Notes"), meta("c", "notes")]
        assert [m.id for m in title_matches(rows, "NOTES")] == ["b", "c"]  # two equal titles: still two
        assert [m.id for m in title_matches(rows[:2], "notes")] == ["b"]

    def test_chinese_and_full_width(self):
        rows = [meta("a", "修复登录错误"), meta("b", "ＡＰＩ design")]
        assert [m.id for m in title_matches(rows, "登录")] == ["a"]
        assert [m.id for m in title_matches(rows, "api")] == ["b"]
        assert fold_title(" Ａ\tB ") == "a b"


class TestAccentsAndWidth:
    """Guards against `--resume "creme brulee"` finding nothing because the title was stored with
    its accents (or full-width, or decomposed), and against folding Japanese marks away."""

    def test_accents_are_folded_on_both_sides(self):
        rows = [meta("a", "Crème brûlée for Zoë"), meta("b", "Straße names"), meta("c", "Ελληνικά notes"),
                meta("d", "cafe\u0301 menu")]
        assert [m.id for m in title_matches(rows, "creme brulee")] == ["a"]
        assert [m.id for m in title_matches(rows, "CRÈME zoe")] == ["a"]
        assert [m.id for m in title_matches(rows, "strasse")] == ["b"]
        assert [m.id for m in title_matches(rows, "ελληνικα")] == ["c"]
        assert [m.id for m in title_matches(rows, "café")] == ["d"]  # stored decomposed, typed composed

    def test_japanese_marks_stay_distinct(self):
        rows = [meta("a", "がっこうの宿題"), meta("b", "かっこう良い"), meta("c", "ｶﾞｯｺｳ")]
        assert [m.id for m in title_matches(rows, "が")] == ["a"]  # not "かっこう"
        assert [m.id for m in title_matches(rows, "かっこう")] == ["b"]
        assert [m.id for m in title_matches(rows, "か\u3099っこう")] == ["a"]  # typed decomposed: still が
        assert [m.id for m in title_matches(rows, "ガッコウ")] == ["c"]  # half-width ｶﾞ is ガ, not カ
        assert title_matches(rows, "カッコウ") == []

    def test_resume_by_a_title_typed_without_accents(self, tmp_path):
        mgr = SessionManager(LocalSessionStore(tmp_path / "data"))
        (tmp_path / "p").mkdir()
        s = mgr.create(tmp_path / "p", title="Crème brûlée")
        mgr.create(tmp_path / "p", title="Creamy soup")
        assert mgr.find_title(s.project_key, "creme brulee") == s.key


class TestFindTitle:
    """Guards against `--resume "words"` opening a chat of another project while this project has
    one, or listing versions of one conversation as several matches."""

    def test_project_first_then_everywhere(self, tmp_path):
        mgr = SessionManager(LocalSessionStore(tmp_path / "data"))
        (tmp_path / "here").mkdir()
        (tmp_path / "there").mkdir()
        here = mgr.create(tmp_path / "here", title="Deploy script")
        there = mgr.create(tmp_path / "there", title="Deploy notes")
        only_there = mgr.create(tmp_path / "there", title="Budget")
        assert mgr.find_title(here.project_key, "deploy") == here.key
        assert mgr.find_title(here.project_key, "budget") == only_there.key
        with pytest.raises(SessionNotFound):
            mgr.find_title(here.project_key, "budget", everywhere=False)
        mgr.create(tmp_path / "there", title="Deploy notes, part 2")
        with pytest.raises(AmbiguousTitle) as err:
            mgr.find_title(there.project_key, "notes deploy")
        assert [t for _, t in err.value.candidates] == ["Deploy notes, part 2", "Deploy notes"]
        assert mgr.find_title(there.project_key, "deploy notes") == there.key  # the exact title

    def test_versions_fold_into_one_match_and_archived_count(self, tmp_path):
        mgr = SessionManager(LocalSessionStore(tmp_path / "data"))
        s = mgr.create(tmp_path, title="Refactor parser")
        mgr.add_messages(s.key, [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])
        mgr.fork(s.key, 0, version=True)
        assert mgr.find_title(s.project_key, "parser") == s.key
        old = mgr.create(tmp_path, title="Old archived idea")
        mgr.archive(old.key)
        assert mgr.find_title(s.project_key, "archived idea") == old.key
