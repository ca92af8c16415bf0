"""The rule that keeps secrets out of memory: a fact that looks like it holds a credential is dropped.

Memories are sent to the model in every new session's system prompt and shown in the UI, so an
API key, a token, a password or a private key must never become one, whether the model proposes
it, the user types it, or the ``remember`` tool is asked to store it. The model is told so too,
but a prompt is a request, not a guarantee: this module is the rule, applied in code.

What counts (each with the reason in :func:`secret_reason`):

- private key blocks (``-----BEGIN … PRIVATE KEY-----``);
- well-known key and token formats: OpenAI / Anthropic ``sk-…``, GitHub ``ghp_…`` /
  ``github_pat_…``, AWS access key ids ``AKIA…``, Slack ``xox?-…``, Google ``AIza…``, Stripe
  ``sk_live_…``, GitLab ``glpat-…``, Hugging Face ``hf_…``, JSON Web Tokens ``eyJ….….…``;
- ``Authorization: Bearer …`` / ``Basic …`` values;
- credentials inside URLs (``scheme://user:password@host``);
- a password / passphrase / secret / token / API key named and followed by a value
  (``password: hunter2``, ``the api key is …``, ``密码是 …``), in several languages;
- any long random-looking token (24+ characters mixing upper case, lower case and digits, the
  shape of generated keys; plain hex such as a git commit id is allowed).

Before any rule, the text is normalised the way a reader sees it: Unicode NFKC (full-width
``ｓｋ－…`` becomes ``sk-…``) with invisible characters removed (a key split by zero-width spaces
reads as one key); the well-known formats are also looked for with spaces removed (a key pasted
in pieces). Then Yelp's maintained ``detect-secrets`` plugins scan each line (keyword
assignments such as ``SECRET_KEY=django-insecure-…`` or ``password=…``, cloud and SaaS token
formats, basic-auth URLs), with anycode's rules above on top.

False positives are accepted on purpose: losing a harmless fact costs less than storing a key.
"""
from __future__ import annotations

import logging
import re
import threading
import unicodedata
from typing import Any

from core.session.text import INVISIBLE

log = logging.getLogger(__name__)

_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("a private key", re.compile(r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|PuTTY-User-Key-File")),
    ("an API key", re.compile(r"\bsk-(?:proj-|ant-|live-|test-)?[A-Za-z0-9_-]{16,}")),
    ("an access token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{16,}"
                                   r"|xox[abposr]-[A-Za-z0-9-]{10,}|hf_[A-Za-z0-9]{20,})")),
    ("an AWS access key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b|aws_secret_access_key", re.IGNORECASE)),
    ("an API key", re.compile(r"\bAIza[0-9A-Za-z_-]{30,}|\b[rs]k_(?:live|test)_[0-9A-Za-z]{16,}")),
    ("a web token", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    ("an authorization header", re.compile(r"\b(?:Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{16,}", re.IGNORECASE)),
    ("a password in a URL", re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s/:@]*:[^\s/@]+@", re.IGNORECASE)),
]
# The formats above that are distinctive enough to look for in text with its spaces removed.
_SPLIT_OK = {"an API key", "an access token", "an AWS access key", "a web token", "a private key"}

# A credential named, then its value: "password: x", "API key is x", "token=x", "密码是 x".
_NAMES = (r"pass(?:word|wd|phrase|code)?|pwd|secret|api[\s_-]?key|access[\s_-]?key|private[\s_-]?key|"
          r"(?:auth|access|refresh|bearer|api|secret)[\s_-]?token|token|client[\s_-]?secret|credentials?|"
          r"passwort|kennwort|mot de passe|contrase[ñn]a|senha|пароль|密码|口令|密碼|パスワード|비밀번호")
_NAMED_VALUE = re.compile(
    rf"(?:{_NAMES})(?:\s+(?:for|of|to|für|pour|de|del|для)\s+[^\s:=]+)?\s*(?:[:=：]|\bis\b|\bwas\b|\bist\b|\best\b|\bes\b|是|为|為|は)\s*"
    r"[\"'`“「]?(?P<value>[^\s\"'`”」,;]{3,})",
    re.IGNORECASE,
)
_LONG_TOKEN = re.compile(r"[A-Za-z0-9+/_=-]{24,}")
# A setting named like a credential and assigned: SECRET_KEY=…, DB_PASSWORD: …, encryption-key = ….
_ASSIGNED = re.compile(r"\b[\w.-]*(?:secret|passw(?:or)?d|pwd|token|api[_-]?key|private[_-]?key|"
                       r"(?:encryption|signing|access|master|hmac)[_-]?key)[\w.-]*\s*[:=]\s*[\"']?(?P<value>[^\s\"',;]{3,})",
                       re.IGNORECASE)
_INVISIBLE_CHARS = re.compile(f"[{INVISIBLE}]")


def _looks_random(token: str) -> bool:
    # Generated keys mix cases and digits; words, paths and hex ids (git commits) do not.
    token = token.strip("=")
    return (any(c.islower() for c in token) and any(c.isupper() for c in token)
            and sum(c.isdigit() for c in token) >= 2)


def _plain_value(value: str) -> bool:
    # "the password policy is strict": a plain lower-case word is not a credential.
    return value.isalpha() and value.islower()


def normalised(text: str) -> str:
    """``text`` as a reader sees it: NFKC (full-width and compatibility letters folded) with every
    invisible character removed (zero-width spaces and joiners, BOM, bidi controls)."""
    return _INVISIBLE_CHARS.sub("", unicodedata.normalize("NFKC", text))


def secret_reason(text: str) -> str | None:
    """What secret ``text`` seems to hold (e.g. ``"an API key"``), or None when it looks clean."""
    if not isinstance(text, str):
        return None
    text = normalised(text)
    despaced = re.sub(r"\s+", "", text)
    for reason, pattern in _PATTERNS:
        if pattern.search(text) or (reason in _SPLIT_OK and pattern.search(despaced)):
            return reason
    for m in _NAMED_VALUE.finditer(text):
        if not _plain_value(m.group("value")):
            return "a password or key"
    for m in _ASSIGNED.finditer(text):
        if not m.group("value").isdigit():  # "max_tokens = 4096" is a number, not a key
            return "a password or key"
    if any(_looks_random(t) for t in _LONG_TOKEN.findall(text)):
        return "a token"
    return _detector_reason(text)


_PLUGINS: list[Any] | None = None
_PLUGINS_LOCK = threading.Lock()  # detect-secrets keeps its settings in one global


def _detector_reason(text: str) -> str | None:
    """What detect-secrets' plugins find in ``text`` (its secret type, e.g. "Secret Keyword"), or
    None. Lines are scanned as YAML, whose rules read unquoted ``key: value`` and ``key=value``
    assignments. Without the package (an incomplete install) anycode's own rules still apply."""
    global _PLUGINS
    try:
        from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
        from detect_secrets.settings import default_settings
    except ImportError:  # pragma: no cover - a dependency of anycode; logged once per call site
        log.warning("detect-secrets is not installed; only anycode's own secret rules apply")
        return None
    with _PLUGINS_LOCK, default_settings():
        if _PLUGINS is None:
            # Every plugin but the public-IP one: an address is a fact ("the server is 203.0.113.5").
            _PLUGINS = [cls() for cls in get_mapping_from_secret_type_to_class().values()
                        if cls.__name__ != "IPPublicDetector"]
        for line in text.splitlines() or [text]:
            for plugin in _PLUGINS:
                found = plugin.analyze_line(filename="memory.yaml", line=line, line_number=1)
                if found:
                    return f"a secret ({next(iter(found)).type})"
    return None


def looks_secret(text: str) -> bool:
    """True when ``text`` seems to hold a credential (see the module docstring for the rule)."""
    return secret_reason(text) is not None


HIDDEN = "[hidden]"
# A credential in a URL's query (``?key=AIza…``, ``&access_token=…``) or its user part.
_URL_PARAM = re.compile(r"([?&;](?:[\w.-]*(?:key|token|secret|password|passwd|pwd|auth|signature|sig|"
                        r"credential)[\w.-]*)=)[^&#\s\"'<>]+", re.IGNORECASE)
_URL_USER = re.compile(r"(\b[a-z][a-z0-9+.-]*://)[^\s/?#@]*@", re.IGNORECASE)
_AUTH_VALUE = re.compile(r"\b(Bearer|Basic|Token)\s+[A-Za-z0-9._~+/=-]{8,}", re.IGNORECASE)


def hide_secrets(text: str) -> str:
    """``text`` with everything the rules above take for a credential replaced by ``[hidden]``:
    known key and token formats, ``Authorization`` values, credentials in URLs (the user part
    and secret-named query parameters such as ``?key=``), named or assigned values
    (``api_key: …``, ``token=…``) and long random-looking tokens. For text that is kept or shown
    where a secret must not be: an error's reason stored in a session, the sentence on the page.
    Other text is returned unchanged."""
    if not isinstance(text, str) or not text:
        return text
    out = _URL_USER.sub(lambda m: m.group(1) + HIDDEN + "@", text)
    out = _URL_PARAM.sub(lambda m: m.group(1) + HIDDEN, out)
    out = _AUTH_VALUE.sub(lambda m: f"{m.group(1)} {HIDDEN}", out)
    for reason, pattern in _PATTERNS:
        if reason not in ("an authorization header", "a password in a URL"):  # done above, keeping the words
            out = pattern.sub(HIDDEN, out)

    def value(m: re.Match, keep: Any) -> str:
        if keep(m.group("value")) or m.group("value") == HIDDEN:
            return m.group(0)
        start, end = m.span("value")
        return m.group(0)[:start - m.start()] + HIDDEN + m.group(0)[end - m.start():]

    out = _NAMED_VALUE.sub(lambda m: value(m, _plain_value), out)
    out = _ASSIGNED.sub(lambda m: value(m, str.isdigit), out)
    return _LONG_TOKEN.sub(lambda m: HIDDEN if _looks_random(m.group(0)) else m.group(0), out)
