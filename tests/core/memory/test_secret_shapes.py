"""Secret shapes the memory filter, error reasons and the shared page must catch, and prose they
must leave alone; one finder (core.memory.secrets.find_secrets) serves all three.

Guards against credentials reaching a memory (and so every later prompt) or a shared page because
they were written the way people write them: named in a sentence ("the wifi password is
sunflower"), a lower-case 64-hex "webhook signing key", an ``sk-`` key typed in groups separated by
spaces. Every example here is in the table of ``docs/memory.md`` (the last test holds them together).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from core.memory.secrets import HIDDEN, find_secrets, hide_secrets, looks_secret, mask_secrets
from core.memory.store import MemoryStore
from core.errors import InvalidMemory
from core.stores.jsonl_store import LocalSessionStore

HEX64 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
DOCS = Path(__file__).resolve().parents[3] / "docs" / "memory.md"

# (shape, example, the value that must not be left readable)
CAUGHT = [
    ("a password named in a sentence", "the wifi password is sunflower", "sunflower"),
    ("a plain word after \"password is\"", "Password is marigold", "marigold"),
    ("a key named, then a colon", f"the signing key: {HEX64}", HEX64),
    ("a token assigned", "token = opensesame", "opensesame"),
    ("lower-case hex next to a credential name with spaces", f"The webhook signing key {HEX64}", HEX64),
    ("lower-case base64-like next to a credential word", "the session secret qk3v9x0l2m8n4b7c1z5a6s8d0f2g4h6j8k",
     "qk3v9x0l2m8n4b7c1z5a6s8d0f2g4h6j8k"),
    ("an sk- key in groups split by spaces", "the key is sk-abcd efgh ijkl mnop qrst uvwx", "qrst"),
    ("an sk-proj- key in mixed groups", "OpenAI: sk-proj-Ab3d Ef6h Ij9k Lm2n Op5q Rs8t", "Lm2n"),
    ("an AWS key id split by dashes", "AWS id AKIA-IOSF-ODNN-7EXA-MPLE", "ODNN"),
    ("a GitHub token split by spaces", "ghp_aBcDeFgH iJkLmNoP qRsTuVwX yZ012345", "qRsTuVwX"),
    ("a password named in Chinese, no spaces", "家里的WiFi密码是sunflower", "sunflower"),
    ("a token named in Chinese", "令牌：opensesame", "opensesame"),
    ("a key named in Chinese", f"部署密钥为 {HEX64}", HEX64),
    ("a password for something", "the password for the staging db is 12345678", "12345678"),
]

PROSE = [
    "the password policy requires 12 characters",
    "use a token bucket",
    "the password is required",
    "the token is expired",
    "Rotate the signing key every 90 days",
    "Store the webhook signing key in the vault",
    "令牌桶算法限制请求速率",
    "我们用令牌桶限流，密码策略要求12位",
    "Max tokens for the summariser is 4096",
    "Release commit is 3f1c2a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a",
    "The tenant id is 123e4567-e89b-12d3-a456-426614174000",
]


class TestShapesAreCaught:
    @pytest.mark.parametrize("shape, text, value", CAUGHT, ids=[c[0] for c in CAUGHT])
    def test_refused_as_a_memory(self, shape, text, value, tmp_path):
        assert looks_secret(text), shape
        with pytest.raises(InvalidMemory, match="memories never hold secrets"):
            MemoryStore(LocalSessionStore(tmp_path)).add(text, scope="user")

    @pytest.mark.parametrize("shape, text, value", CAUGHT, ids=[c[0] for c in CAUGHT])
    def test_masked_where_shown(self, shape, text, value):
        masked, count = mask_secrets(text)
        assert value not in masked and HIDDEN in masked and count >= 1, masked
        assert hide_secrets(text) == masked  # one code path


class TestProseIsLeftAlone:
    @pytest.mark.parametrize("text", PROSE)
    def test_not_a_secret(self, text):
        assert not looks_secret(text)
        assert mask_secrets(text) == (text, 0)


class TestMasking:
    def test_the_words_around_stay_and_each_value_counts_once(self):
        text = ("Connect with postgres://admin:s3cr3t@db.internal/app, the wifi password is sunflower "
                "and the key is sk-abcd efgh ijkl mnop qrst uvwx for the build.")
        masked, count = mask_secrets(text)
        assert masked == ("Connect with postgres://[hidden]@db.internal/app, the wifi password is [hidden] "
                          "and the key is [hidden] for the build.")
        assert count == 3

    def test_spans_are_on_the_text_as_given(self):
        """Full-width letters and zero-width spaces are read as the reader sees them, and the
        characters replaced are the ones the text holds."""
        text = "鍵は ｓｋ－ｐｒｏｊ－Ａｂ３ｄＥｆ６ｈＩｊ９ｋＬｍ２ｎＯｐ５ｑＲｓ８ｔ です; pwd: hun\u200bter22!"
        found = find_secrets(text)
        assert [text[f.start:f.end] for f in found] == ["ｓｋ－ｐｒｏｊ－Ａｂ３ｄＥｆ６ｈＩｊ９ｋＬｍ２ｎＯｐ５ｑＲｓ８ｔ",
                                                        "hun\u200bter22!"]
        assert mask_secrets(text)[0] == "鍵は [hidden] です; pwd: [hidden]"


def test_every_shape_is_in_the_table_of_docs_memory():
    table = DOCS.read_text(encoding="utf-8")
    rows = [line for line in table.splitlines() if line.startswith("| ")]
    missing = [text for _, text, _ in CAUGHT if not any(f"`{text}`" in r and "masked" in r for r in rows)]
    missing += [text for text in PROSE if not any(f"`{text}`" in r and "left alone" in r for r in rows)]
    assert not missing, f"docs/memory.md lacks rows for {missing}"
    assert not re.search(r"\| `[^`]*\|", table)
