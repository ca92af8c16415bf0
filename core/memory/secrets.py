"""The rule that keeps secrets out of memory, error reasons and shared pages: one finder of
credential-shaped values, two uses.

Memories are sent to the model in every new session's system prompt and shown in the UI, so an
API key, a token, a password or a private key must never become one, whether the model proposes
it, the user types it, or the ``remember`` tool is asked to store it (:func:`secret_reason`: a
fact holding one is refused). An error reason kept in a session and the page made to share a
conversation show text where a secret must not be (:func:`hide_secrets`, :func:`mask_secrets`:
each value replaced by ``[hidden]``). Both ask :func:`find_secrets`, so what the memory refuses
is exactly what a shared page masks. The model is told about secrets too, but a prompt is a
request, not a guarantee: this module is the rule, applied in code.

What counts (the reason each gives in brackets; ``docs/memory.md`` has the table of tested shapes):

- private key blocks (``-----BEGIN … PRIVATE KEY-----``) [a private key];
- well-known key and token formats: OpenAI / Anthropic ``sk-…``, GitHub ``ghp_…`` /
  ``github_pat_…``, AWS access key ids ``AKIA…``, Slack ``xox?-…``, Google ``AIza…``, Stripe
  ``sk_live_…``, GitLab ``glpat-…``, Hugging Face ``hf_…``, JSON Web Tokens ``eyJ….….…`` — also
  when written in groups split by spaces or dashes that join into the format
  (``sk-proj-Ab3d Ef6h …``, ``AKIA-IOSF-ODNN-…``);
- ``Authorization: Bearer …`` / ``Basic …`` / ``Token …`` values, credentials in URLs (the
  ``user:password@`` part, secret-named query parameters such as ``?key=``);
- a credential named in natural language and followed by its value: ``the wifi password is
  sunflower``, ``password: hunter2``, ``the signing key: …``, ``token = …``, ``密码是 …``,
  ``令牌：…``, ``密钥为 …`` and the like in several languages. The names are detect-secrets'
  keyword deny-list (``api_?key``, ``secret``, ``password``…, with spaces allowed where it has
  ``_``) plus anycode's (``signing key``, ``webhook secret``, ``令牌``…). A plain word is a value
  too ("sunflower"), except the words that say something *about* a credential ("the password is
  required", "the token is expired");
- settings named like a credential and assigned (``SECRET_KEY=…``, ``DB_PASSWORD: …``), unless
  the value is a number (``max_tokens = 4096``);
- hex or base64 of key length (32+ characters) within a few words after a credential word ("the
  webhook signing key 9f86d0…"): lower-case hex has no mixed case for the next rule to see;
- any long random-looking token (24+ characters mixing upper case, lower case and digits, the
  shape of generated keys; plain hex such as a git commit id is allowed);
- what Yelp's maintained ``detect-secrets`` plugins find in a line (keyword assignments, cloud
  and SaaS token formats, quoted high-entropy strings, basic-auth URLs).

Before any rule, the text is normalised the way a reader sees it: Unicode NFKC (full-width
``ｓｋ－…`` becomes ``sk-…``) with invisible characters removed (a key split by zero-width spaces
reads as one key); what is found is mapped back onto the text as given, so masking replaces the
characters the reader saw.

False positives are accepted on purpose for memory (losing a harmless fact costs less than storing
a key), but ordinary prose about credentials ("the password policy requires 12 characters", "use
a token bucket") is not a secret: the tests hold both sides.
"""
from __future__ import annotations

import logging
import re
import threading
import unicodedata
from dataclasses import dataclass
from typing import Any, Iterator

from core.session.text import INVISIBLE

log = logging.getLogger(__name__)

HIDDEN = "[hidden]"

_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("a private key", re.compile(r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|PuTTY-User-Key-File")),
    ("an API key", re.compile(r"\bsk-(?:proj-|ant-|live-|test-)?[A-Za-z0-9_-]{16,}")),
    ("an access token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{16,}"
                                   r"|xox[abposr]-[A-Za-z0-9-]{10,}|hf_[A-Za-z0-9]{20,})")),
    ("an AWS access key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b|aws_secret_access_key", re.IGNORECASE)),
    ("an API key", re.compile(r"\bAIza[0-9A-Za-z_-]{30,}|\b[rs]k_(?:live|test)_[0-9A-Za-z]{16,}")),
    ("a web token", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
]
# The formats above a key written in groups ("sk-proj-Ab3d Ef6h Ij9k …") is joined into, and the
# beginnings a group run must start with to be tried (so prose is not joined word by word).
_GROUPED_FORMATS = [p for reason, p in _PATTERNS if reason != "a private key"]
_GROUP_START = re.compile(r"(?<![A-Za-z0-9_-])(?:sk|rk_|gh[pousr]_|github_pat_|glpat|xox|hf_|AKIA|ASIA|AIza|eyJ)")
_CHUNK = re.compile(r"[A-Za-z0-9_]+")
_GROUP_SEP = re.compile(r"[ \t]*-[ \t]*|[ \t]*\n?[ \t]*(?<=[ \t\n])")
_MAX_GROUPS = 40

# A credential in an Authorization-style value, a URL's user part or its query.
_AUTH_VALUE = re.compile(r"\b(?:Bearer|Basic|Token)\s+(?P<value>[A-Za-z0-9._~+/=-]{8,})", re.IGNORECASE)
_URL_PASSWORD = re.compile(r"\b[a-z][a-z0-9+.-]*://(?P<value>[^\s/?#@:]*:[^\s/?#@]+)@", re.IGNORECASE)
_URL_PARAM = re.compile(r"[?&;](?:[\w.-]*(?:key|token|secret|password|passwd|pwd|auth|signature|sig|"
                        r"credential)[\w.-]*)=(?P<value>[^&#\s\"'<>]+)", re.IGNORECASE)


def _keyword_names() -> str:
    """detect-secrets' keyword deny-list (``api_?key``, ``password``, ``secret``…) as names in
    prose: where it allows an optional ``_``, a space or a dash is allowed too ("api key")."""
    try:
        from detect_secrets.plugins.keyword import DENYLIST
    except ImportError:  # pragma: no cover - a dependency of anycode
        DENYLIST = ("api_?key", "password", "passwd", "pwd", "secret")
    return "|".join(name.replace("_?", r"[\s_-]?") for name in DENYLIST)


# A credential named, then its value: "password: x", "the signing key is x", "token=x", "密码是 x".
_LATIN_NAMES = (_keyword_names() + r"|pass(?:word|wd|phrase|code)?|pin[\s_-]?code|"
                r"(?:signing|encryption|master|hmac|webhook|wi-?fi|wlan|ssh|deploy|licen[cs]e|access|secret|private|"
                r"api|auth|client|service|account|session)[\s_-]?(?:key|secret|token|password)|"
                r"(?:auth|access|refresh|bearer|api|secret|session|personal[\s_-]access|bot)[\s_-]?token|token|"
                r"client[\s_-]?secret|credentials?|"
                r"passwort|kennwort|mot de passe|contrase[ñn]a|senha|пароль|ключ|токен")
# No word boundary in Chinese, Japanese or Korean text: "WiFi密码是…" names a password all the same.
_CJK_NAMES = r"密码|口令|密碼|令牌|密钥|密鑰|秘钥|私钥|パスワード|トークン|비밀번호|토큰"
_CONNECTOR = (r"\s*(?P<conn>[:=：]|\bis\b|\bwas\b|\bare\b|\bist\b|\best\b|\bes\b|\bé\b|\bequals\b|\bset to\b|"
              r"是|为|為|は|：)\s*")
_NAMED_VALUE = re.compile(
    rf"(?P<name>(?<![A-Za-z])(?:{_LATIN_NAMES})|{_CJK_NAMES})s?"
    rf"(?:\s+(?:for|of|to|on|für|pour|de|del|для)(?:\s+[^\s:=]+){{1,3}}?)?{_CONNECTOR}"
    r"[\"'`“「]?(?P<value>[^\s\"'`”」,;，。、]{3,})",
    re.IGNORECASE,
)
# Words that say something about a credential rather than being one ("the password is required").
_ABOUT = frozenset("""
not none null nil empty blank required optional needed necessary missing set unset wrong incorrect invalid
correct valid expired expiring revoked rotated changed reset stored saved kept hashed salted encrypted hidden masked
redacted shown secret private public strong weak long short too very same different managed generated provided
configured defined used sent given ignored disabled enabled case sensitive case-sensitive insensitive unknown known
available unavailable also still now then here there this that it its your my our their his her which what where
how when who stale old new temporary fine ok okay good bad only being been be always never usually typically
automatically checked verified validated accepted rejected refused read written loaded passed injected pulled
fetched printed logged leaked compromised least more less longer shorter the and but or for with from into over
under via per each every any all some another other same whatever undefined true false yes no unchanged updated
the-same mandatory allowed forbidden supported deprecated unique random secure insecure safe unsafe protected
""".split())
_PLACEHOLDERS = frozenset("none null nil empty blank required optional not unset redacted hidden masked see the a an "
                          "same n/a tbd todo".split())
_LONG_TOKEN = re.compile(r"[A-Za-z0-9+/_=-]{24,}")
_SETTING_PREFIX = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*=(?=[^=])")
# A setting named like a credential and assigned: SECRET_KEY=…, DB_PASSWORD: …, encryption-key = ….
_ASSIGNED = re.compile(r"\b[\w.-]*(?:secret|passw(?:or)?d|pwd|token|api[_-]?key|private[_-]?key|"
                       r"(?:encryption|signing|access|master|hmac)[_-]?key)[\w.-]*\s*[:=]\s*[\"']?(?P<value>[^\s\"',;]{3,})",
                       re.IGNORECASE)
# Hex or base64 of key length within a few words after a credential word ("signing key 9f86d0…").
_CREDENTIAL_WORD = (r"(?:(?<![A-Za-z])(?:key|secret|token|password|passphrase|passwd|signature|salt|hmac|credentials?)s?"
                    r"(?![A-Za-z])|密钥|密鑰|秘钥|令牌|密码|口令|トークン|토큰)")
_NEAR_VALUE = re.compile(
    _CREDENTIAL_WORD + r"[^\n.;!?。]{0,40}?(?<![A-Za-z0-9+/_=-])"
    r"(?P<value>[0-9a-fA-F]{32,}|[A-Za-z0-9+/]{32,}={0,2}|[A-Za-z0-9_-]{32,})(?![A-Za-z0-9+/_=-])",
    re.IGNORECASE)
_INVISIBLE_CHARS = re.compile(f"[{INVISIBLE}]")
_DETECTOR_HINT = re.compile(r"[A-Za-z0-9+/=_-]{12,}|@")  # what a line needs for a format plugin to find anything
_KEYWORD_HINT = re.compile(r"key|pass|pwd|secret|contrase", re.IGNORECASE)  # detect-secrets' keyword plugin


@dataclass(frozen=True)
class Found:
    """A credential-shaped value in a text: ``[start, end)`` (characters of the text as given) and
    ``reason``, what it seems to be ("an API key", "a password or key", …)."""

    start: int
    end: int
    reason: str


def _looks_random(token: str) -> bool:
    # Generated keys mix cases and digits; words, paths and hex ids (git commits) do not.
    token = token.strip("=")
    return (any(c.islower() for c in token) and any(c.isupper() for c in token)
            and sum(c.isdigit() for c in token) >= 2)


def _about_word(value: str, connector: str) -> bool:
    """Whether a named value is a word about the credential ("the password is required"), not its
    value. After ``:`` or ``=`` only a placeholder is ("password: none"): "passphrase: correct
    horse battery staple" is one."""
    word = value.strip(".!?:)").casefold()
    return word in (_PLACEHOLDERS if connector in (":", "=", "：") else _ABOUT)


def normalised(text: str) -> str:
    """``text`` as a reader sees it: NFKC (full-width and compatibility letters folded) with every
    invisible character removed (zero-width spaces and joiners, BOM, bidi controls)."""
    return _INVISIBLE_CHARS.sub("", unicodedata.normalize("NFKC", text))


def _normalised_map(text: str) -> tuple[str, list[int] | None]:
    """:func:`normalised` text and, for each of its characters, the index in ``text`` it comes
    from (plus ``len(text)`` at the end); None when the two are the same (ASCII text)."""
    if (text.isascii() or unicodedata.is_normalized("NFKC", text)) and not _INVISIBLE_CHARS.search(text):
        return text, None
    out: list[str] = []
    where: list[int] = []
    for i, ch in enumerate(text):
        if _INVISIBLE_CHARS.match(ch):
            continue
        piece = unicodedata.normalize("NFKC", ch) if not ch.isascii() else ch
        out.append(piece)
        where.extend([i] * len(piece))
    where.append(len(text))
    return "".join(out), where


def _value_span(m: re.Match[str]) -> tuple[int, int]:
    start, end = m.span("value")
    value = m.group("value")
    trimmed = value.rstrip(".)")  # the sentence's full stop or a closing bracket is not the value's
    return start, end - (len(value) - len(trimmed)) if trimmed else end


def _grouped(text: str) -> Iterator[tuple[int, int]]:
    """Spans of keys written in groups split by spaces or dashes ("sk-proj-Ab3d Ef6h Ij9k …",
    "AKIA-IOSF-ODNN-7EXA-MPLE") that join into a known format."""
    for begin in _GROUP_START.finditer(text):
        first = _CHUNK.match(text, begin.start())
        kept = dropped = first.group()  # joined keeping the dashes / without them
        best, prev, pos = None, first, first.end()
        for n in range(_MAX_GROUPS):
            sep = _GROUP_SEP.match(text, pos)
            nxt = _CHUNK.match(text, sep.end()) if sep else None
            if nxt is None or sep.group().count("\n") > 1:
                break
            group = nxt.group()
            # A key's groups look alike (same length) or random; a plain word after it ends it.
            if n > 0 and not (len(group) == len(prev.group()) or any(c.isdigit() or c.isupper() for c in group)):
                break
            kept += ("-" if "-" in sep.group() else "") + group
            dropped += group
            if any(p.fullmatch(kept) or p.fullmatch(dropped) for p in _GROUPED_FORMATS):
                best = nxt.end()
            if len(kept) > 200:
                break
            prev, pos = nxt, nxt.end()
        if best is not None:
            yield first.start(), best


def _scan(text: str) -> Iterator[tuple[int, int, str]]:
    """Every credential-shaped value of normalised ``text`` as ``(start, end, reason)``, rule by
    rule in the order of the module docstring (the first one found is the reason given)."""
    for reason, pattern in _PATTERNS:
        for m in pattern.finditer(text):
            yield m.start(), m.end(), reason
    for start, end in _grouped(text):
        yield start, end, "an API key"
    for m in _AUTH_VALUE.finditer(text):
        if not (m.group("value").isalpha() and m.group("value").islower()):  # "Token expiration" is prose
            yield *m.span("value"), "an authorization header"
    for m in _URL_PASSWORD.finditer(text):
        yield *m.span("value"), "a password in a URL"
    for m in _URL_PARAM.finditer(text):
        if m.group("value") != HIDDEN:
            yield *m.span("value"), "a key in a URL"
    for m in _NAMED_VALUE.finditer(text):
        value = m.group("value")
        if _about_word(value, m.group("conn")) or value == HIDDEN or (value.isdigit() and "token" in m.group("name").lower()):
            continue  # "the password is required"; "max tokens for the summariser is 4096" is a count
        yield *_value_span(m), "a password or key"
    for m in _ASSIGNED.finditer(text):
        if not m.group("value").isdigit() and m.group("value") != HIDDEN:  # "max_tokens = 4096" is a number
            yield *_value_span(m), "a password or key"
    for m in _NEAR_VALUE.finditer(text):
        value = m.group("value")
        if any(c.isdigit() for c in value) and any(c.isalpha() for c in value):
            yield *m.span("value"), "a key"
    for m in _LONG_TOKEN.finditer(text):
        if _looks_random(m.group(0)):
            # "key=AIza…" in a query is one run of token characters: the name stays readable.
            named = _SETTING_PREFIX.match(m.group(0))
            start = m.start() + (named.end() if named and _looks_random(m.group(0)[named.end():]) else 0)
            yield start, m.end(), "a token"
    yield from _detected(text)


_PLUGINS: list[Any] | None = None
_PLUGINS_LOCK = threading.Lock()  # detect-secrets keeps its settings in one global


def _detected(text: str) -> Iterator[tuple[int, int, str]]:
    """What detect-secrets' plugins find in ``text``, line by line, as spans (the secret value
    where the plugin names it, else the line). Lines are scanned as YAML, whose rules read
    unquoted ``key: value`` and ``key=value`` assignments. A line with nothing a plugin could
    match (no long token, no credential word) is not handed to them: they cost ~0.1 ms a line.
    Without the package (an incomplete install) anycode's own rules still apply."""
    global _PLUGINS
    try:
        from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
        from detect_secrets.plugins.ip_public import IPPublicDetector
        from detect_secrets.plugins.keyword import KeywordDetector
        from detect_secrets.settings import default_settings
    except ImportError:  # pragma: no cover - a dependency of anycode
        log.warning("detect-secrets is not installed; only anycode's own secret rules apply")
        return
    offset = 0
    found: list[tuple[int, int, str]] = []
    with _PLUGINS_LOCK, default_settings():
        if _PLUGINS is None:
            # Every plugin but the public-IP one: an address is a fact ("the server is 203.0.113.5").
            _PLUGINS = [cls() for cls in get_mapping_from_secret_type_to_class().values()
                        if not issubclass(cls, IPPublicDetector)]
        for line in text.split("\n"):
            formats, keyword = bool(_DETECTOR_HINT.search(line)), bool(_KEYWORD_HINT.search(line))
            if formats or keyword:
                for plugin in _PLUGINS:
                    if not (keyword if isinstance(plugin, KeywordDetector) else formats):
                        continue
                    for secret in plugin.analyze_line(filename="memory.yaml", line=line, line_number=1) or ():
                        value = getattr(secret, "secret_value", None) or ""
                        at = line.find(value) if value else -1
                        start, end = (at, at + len(value)) if at >= 0 else (0, len(line))
                        found.append((offset + start, offset + end, f"a secret ({secret.type})"))
            offset += len(line) + 1
    yield from found


def find_secrets(text: str) -> list[Found]:
    """Every credential-shaped value in ``text`` (rules in the module docstring), as
    non-overlapping :class:`Found` spans of ``text`` as given, in text order (overlapping finds
    merged, keeping the first rule's reason). ``[]`` for anything but non-empty text."""
    if not isinstance(text, str) or not text:
        return []
    norm, where = _normalised_map(text)
    spans = sorted(((s, e, r, n) for n, (s, e, r) in enumerate(_scan(norm)) if e > s), key=lambda x: (x[0], -x[1]))
    merged: list[list[Any]] = []
    for s, e, reason, order in spans:
        if merged and s < merged[-1][1]:
            last = merged[-1]
            last[1] = max(last[1], e)
            if order < last[3]:
                last[2], last[3] = reason, order
            continue
        merged.append([s, e, reason, order])
    if where is None:
        return [Found(s, e, r) for s, e, r, _ in merged]
    return [Found(where[s], where[e - 1] + 1, r) for s, e, r, _ in merged]


def secret_reason(text: str) -> str | None:
    """What secret ``text`` seems to hold (e.g. ``"an API key"``), or None when it looks clean:
    the reason of the first rule (module docstring order) that finds one."""
    if not isinstance(text, str) or not text:
        return None
    for _start, _end, reason in _scan(_normalised_map(text)[0]):
        return reason
    return None


def looks_secret(text: str) -> bool:
    """True when ``text`` seems to hold a credential (see the module docstring for the rule)."""
    return secret_reason(text) is not None


def mask_secrets(text: str) -> tuple[str, int]:
    """``(text with every value of :func:`find_secrets` replaced by [hidden], how many were)``.
    The words around a value stay ("password: [hidden]", "http://[hidden]@host", "Bearer
    [hidden]"), so the reader still sees what was there. Non-text is returned as is, with 0."""
    found = find_secrets(text)
    if not found:
        return text, 0
    out, last = [], 0
    for f in found:
        out.append(text[last:f.start])
        out.append(HIDDEN)
        last = f.end
    out.append(text[last:])
    return "".join(out), len(found)


def hide_secrets(text: str) -> str:
    """``text`` with every credential-shaped value replaced by ``[hidden]`` (:func:`mask_secrets`),
    for text that is kept or shown where a secret must not be: an error's reason stored in a
    session, the sentence on the page, the page made to share. Other text is returned unchanged."""
    return mask_secrets(text)[0]
