"""The README and docs/ as a reader follows them: every relative link and image resolves.

Guards against a manual page moved or renamed while a link to it (or to one of its headings) stays
behind, which a reader meets as a 404 on GitHub or a dead link in an editor.
"""
from __future__ import annotations

import pathlib
import re
import urllib.parse

import pytest
from markdown_it import MarkdownIt

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_md = MarkdownIt("commonmark").enable("table")


# A repository path inside code: a top-level folder of this tree, then a file with a suffix or a folder.
_REPO_PATH = re.compile(r"(?<![\w./$<-])((?:core|webui|tests|benchmarks|assets|docs)/[\w./-]*(?:\.(?:py|md|json|css|js|svg|png)|/))(?![\w<])")


def _walk(tokens):
    for tok in tokens:
        yield tok
        if tok.children:
            yield from _walk(tok.children)


def _slug(text: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped (``-`` and ``_`` kept), spaces to ``-``."""
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: pathlib.Path) -> set[str]:
    tokens = _md.parse(page.read_text(encoding="utf-8"))
    return {_slug(tokens[i + 1].content) for i, tok in enumerate(tokens) if tok.type == "heading_open"}


def _targets(page: pathlib.Path) -> list[str]:
    found = []
    for tok in _walk(_md.parse(page.read_text(encoding="utf-8"))):
        if tok.type == "link_open":
            found.append(tok.attrs.get("href", ""))
        elif tok.type == "image":
            found.append(tok.attrs.get("src", ""))
    return found


class TestLinksResolve:
    """A relative link in the README or docs/ pointing at a file or heading that does not exist."""

    def test_the_readme_is_a_front_door(self):
        lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
        assert len(lines) <= 200, f"README.md has {len(lines)} lines; the manual belongs in docs/"

    @pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
    def test_every_relative_link_resolves(self, page):
        bad = []
        for href in _targets(page):
            parts = urllib.parse.urlsplit(href)
            if parts.scheme or parts.netloc or href.startswith("mailto:"):
                continue  # not relative: nothing here may fetch it, and no test reaches the internet
            target = (page.parent / urllib.parse.unquote(parts.path)).resolve() if parts.path else page
            if not target.exists():
                bad.append(f"{href}: no such file")
            elif parts.fragment and target.suffix == ".md" and parts.fragment not in _anchors(target):
                bad.append(f"{href}: no heading #{parts.fragment} in {target.relative_to(ROOT)}")
        assert not bad, f"{page.relative_to(ROOT)}: " + "; ".join(bad)

    @pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
    def test_every_file_named_in_code_exists(self, page):
        """A path written as code (`webui/gui/app.py`, `tests/support/`) names a file of this tree."""
        bad = []
        for tok in _walk(_md.parse(page.read_text(encoding="utf-8"))):
            if tok.type not in ("code_inline", "fence"):
                continue
            for path in _REPO_PATH.findall(tok.content):
                if not (ROOT / path.split("::")[0]).exists():
                    bad.append(path)
        assert not bad, f"{page.relative_to(ROOT)} names files that do not exist: " + ", ".join(sorted(set(bad)))

    def test_the_check_sees_links(self):
        """The parser must find the README's links at all, or the test above passes on nothing."""
        assert any(t.startswith("docs/") for t in _targets(ROOT / "README.md"))
