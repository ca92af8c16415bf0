"""The web UI's string catalogue: one JSON file per language in ``webui/locales/`` (``en.json``,
``zh-CN.json``; adding a language is adding a file), read by our server-rendered HTML, toasts and
notices (:func:`t`, :func:`tn`) and by Gradio's own i18n for the static component labels
(:func:`webui.gui.i18n_ui.gradio_i18n`).

A catalogue maps a key to a string with ``str.format`` placeholders (``"{n} more"``), or, for a
count, to its plural forms by CLDR plural category (``{"one": "{n} conversation", "other":
"{n} conversations"}``; the categories a language needs come from Babel's plural rules). Keys are
flat snake_case names (no dots: Gradio's frontend, svelte-i18n, reads dots as nesting).

Which language: the one a request asks for (:func:`request_lang`): the page's language setting
(cookie ``anycode_lang``), else ``ANYCODE_LANG``, else the browser's languages
(``navigator.languages``, sent as cookie ``anycode_nav``, then the ``Accept-Language`` header),
else English. Inside a Gradio event the request is Gradio's own (``gradio.context.LocalContext``,
set for sync, async and generator handlers alike), so handlers need not pass it along; outside one
(tests, background threads) :func:`using` sets it, else ``ANYCODE_LANG`` or English applies.
The browser's time zone (cookie ``anycode_tz``, from ``Intl.DateTimeFormat``) comes the same way
(:func:`zone`). No Gradio import here: render.py stays Gradio-free.
"""
from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import os
import string
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator, Mapping
from urllib.parse import unquote
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from babel import Locale, UnknownLocaleError
from babel.numbers import format_decimal

log = logging.getLogger(__name__)

LOCALES_DIR = Path(__file__).parent.parent / "locales"  # webui/locales (this module is webui/i18n/__init__.py)
DEFAULT_LANG = "en"
ENV_VAR = "ANYCODE_LANG"
LANG_COOKIE = "anycode_lang"  # the page's language setting ("auto" or absent: follow the browser)
NAV_COOKIE = "anycode_nav"  # navigator.languages, comma-separated
TZ_COOKIE = "anycode_tz"  # Intl.DateTimeFormat().resolvedOptions().timeZone
PLURAL_CATEGORIES = ("zero", "one", "two", "few", "many", "other")

# (language, time zone name) set by :func:`using`; None: read the current request.
_forced: contextvars.ContextVar[tuple[str | None, str | None] | None] = contextvars.ContextVar(
    "anycode_i18n_forced", default=None)


@lru_cache(maxsize=1)
def catalogues() -> dict[str, dict[str, Any]]:
    """``{language code: {key: str | {plural category: str}}}`` from ``locales/*.json``; the
    file name is the BCP 47 code (``zh-CN.json``). Read once per process."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(LOCALES_DIR.glob("*.json")):
        with open(path, encoding="utf-8") as f:
            out[path.stem] = json.load(f)
    if DEFAULT_LANG not in out:
        raise RuntimeError(f"the English catalogue {LOCALES_DIR / 'en.json'} is missing")
    return out


def languages() -> list[str]:
    """The language codes with a catalogue, English first."""
    return sorted(catalogues(), key=lambda code: (code != DEFAULT_LANG, code))


def language_name(code: str) -> str:
    """A language's own name for the language setting (``"简体中文"``), from its catalogue."""
    return str(catalogues().get(code, {}).get("language_name", code))


def match(tag: str | None) -> str | None:
    """The catalogue language for one BCP 47 tag, or None: the exact code (case-insensitive,
    ``_`` or ``-``), else the first language with the same primary subtag (``zh-Hans-CN``,
    ``zh-TW`` and ``zh`` read Simplified Chinese, ``en-GB`` English) — as Gradio's frontend
    falls back from ``zh-TW`` to ``zh``."""
    if not tag:
        return None
    tag = tag.strip().replace("_", "-")
    codes = languages()
    for code in codes:
        if code.lower() == tag.lower():
            return code
    primary = tag.split("-")[0].lower()
    for code in codes:
        if code.split("-")[0].lower() == primary:
            return code
    return None


def negotiate(preferred: list[str]) -> str | None:
    """The first of ``preferred`` (most wanted first) that :func:`match` finds, or None."""
    for tag in preferred:
        found = match(tag)
        if found:
            return found
    return None


def parse_accept_language(header: str | None) -> list[str]:
    """The tags of an HTTP ``Accept-Language`` header, highest ``q`` first (RFC 9110 §12.5.4);
    ``*`` and ``q=0`` entries dropped."""
    tags: list[tuple[float, int, str]] = []
    for i, part in enumerate((header or "").split(",")):
        bits = [b.strip() for b in part.split(";")]
        tag, q = bits[0], 1.0
        for b in bits[1:]:
            if b.startswith("q="):
                try:
                    q = float(b[2:])
                except ValueError:
                    q = 0.0
        if tag and tag != "*" and q > 0:
            tags.append((-q, i, tag))
    return [tag for _q, _i, tag in sorted(tags)]


def _request() -> Any:
    """The Gradio request of the event being handled, or None (no Gradio import: read only if
    Gradio is loaded)."""
    context = sys.modules.get("gradio.context")
    if context is None:
        return None
    try:
        return context.LocalContext.request.get(None)
    except LookupError:
        return None


def _cookies(request: Any) -> Mapping[str, str]:
    try:
        cookies = request.cookies
    except Exception:  # noqa: BLE001 -- a request without cookies (an API client)
        return {}
    if isinstance(cookies, Mapping):
        return cookies
    try:  # gr.Request hands dicts out as its own Obj (keys(), __getitem__), not a Mapping
        return {str(k): str(cookies[k]) for k in cookies.keys()}
    except Exception:  # noqa: BLE001
        return {}


def _header(request: Any, name: str) -> str:
    try:
        return request.headers.get(name) or ""
    except Exception:  # noqa: BLE001
        return ""


def env_lang() -> str | None:
    """``ANYCODE_LANG`` matched to a catalogue (None when unset, ``auto`` or unknown)."""
    value = os.environ.get(ENV_VAR, "").strip()
    if not value or value.lower() == "auto":
        return None
    found = match(value)
    if found is None:
        _warn_unknown(value)
    return found


@lru_cache(maxsize=8)
def _warn_unknown(value: str) -> None:
    log.warning("%s=%r has no catalogue (have: %s); following the browser", ENV_VAR, value, ", ".join(languages()))


def setting_lang(request: Any = None) -> str | None:
    """The page's language setting of ``request`` (cookie ``anycode_lang``), None for automatic."""
    request = _request() if request is None else request
    setting = unquote(_cookies(request).get(LANG_COOKIE, "") or "") if request is not None else ""
    return match(setting) if setting and setting != "auto" else None


def request_lang(request: Any = None) -> str:
    """The language for ``request`` (default: the current Gradio request): the page setting,
    ``ANYCODE_LANG``, the browser's languages, ``Accept-Language``, else English."""
    request = _request() if request is None else request
    cookies = _cookies(request) if request is not None else {}
    chosen = setting_lang(request) if request is not None else None
    if chosen:
        return chosen
    from_env = env_lang()
    if from_env:
        return from_env
    if request is not None:
        browser = negotiate([t for t in unquote(cookies.get(NAV_COOKIE, "") or "").split(",") if t])
        if browser:
            return browser
        header = negotiate(parse_accept_language(_header(request, "accept-language")))
        if header:
            return header
    return DEFAULT_LANG


def browser_lang(request: Any = None) -> str:
    """The language Gradio's frontend shows its static labels in: the browser's first language
    (``navigator.language``) matched as Gradio does (exact, then primary subtag), else English.
    When :func:`request_lang` differs (a setting, ``ANYCODE_LANG``), the page relabels them."""
    request = _request() if request is None else request
    if request is None:
        return DEFAULT_LANG
    nav = [t for t in unquote(_cookies(request).get(NAV_COOKIE, "") or "").split(",") if t]
    if not nav:
        nav = parse_accept_language(_header(request, "accept-language"))[:1]
    return (match(nav[0]) if nav else None) or DEFAULT_LANG


def lang() -> str:
    """The language of the current request (or of :func:`using`)."""
    forced = _forced.get()
    if forced is not None and forced[0]:
        return forced[0]
    return request_lang()


def zone() -> ZoneInfo | None:
    """The browser's time zone for the current request (cookie ``anycode_tz``, an IANA name),
    or None for the server's local time (no browser, or a name zoneinfo does not know)."""
    forced = _forced.get()
    name = forced[1] if forced is not None else None
    if name is None and forced is None:
        request = _request()
        name = _zone_cookie(request) if request is not None else ""
    if not name:
        return None
    try:
        return _zone(name)
    except (ZoneInfoNotFoundError, ValueError):
        log.debug("unknown time zone %r; using the server's", name)
        return None


def _zone_cookie(request: Any) -> str:
    """The IANA zone name in ``request``'s ``anycode_tz`` cookie ("" when it has none)."""
    return unquote(_cookies(request).get(TZ_COOKIE, "") or "")


@lru_cache(maxsize=64)
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


@contextlib.contextmanager
def using(language: str | None = None, tz: str | None = None) -> Iterator[None]:
    """Within the block, :func:`lang` is ``language`` and :func:`zone` is ``tz`` (IANA name;
    None: server local time) whatever the request says: for tests and background work."""
    token = _forced.set((match(language) if language else None, tz))
    try:
        yield
    finally:
        _forced.reset(token)


@contextlib.contextmanager
def for_request(request: Any) -> Iterator[None]:
    """Within the block, :func:`lang` and :func:`zone` are those of ``request`` (any object with
    ``cookies`` and ``headers``, e.g. a Starlette request that is not a Gradio event's: the
    page's own HTML), as they are for that browser's events."""
    with using(request_lang(request), _zone_cookie(request) or None):
        yield


def babel_locale(language: str | None = None) -> Locale:
    """The Babel ``Locale`` of ``language`` (default: :func:`lang`); English if Babel lacks it."""
    code = (language or lang()).replace("-", "_")
    try:
        return Locale.parse(code)
    except (UnknownLocaleError, ValueError):
        return Locale.parse(DEFAULT_LANG)


class Msg(str):
    """A catalogue key usable where an English string was: its ``str`` value is the English
    text (so ``notice == handlers.CONFLICT_NOTICE`` keeps holding in English), its ``key`` the
    catalogue key; :func:`t` turns it into the request's language."""

    key: str

    def __new__(cls, key: str) -> "Msg":
        english = catalogues()[DEFAULT_LANG].get(key)
        if not isinstance(english, str):
            raise KeyError(f"no English string for {key!r} in the catalogue")
        obj = super().__new__(cls, english)
        obj.key = key
        return obj

    def __reduce__(self) -> tuple:  # copy/deepcopy/pickle rebuild it from the key
        return (Msg, (self.key,))


def _lookup(key: str, language: str) -> Any:
    cats = catalogues()
    value = cats.get(language, {}).get(key)
    if value is None:
        value = cats[DEFAULT_LANG].get(key)
        if value is None:
            raise KeyError(f"unknown UI string {key!r}")
        if language != DEFAULT_LANG:
            log.warning("no %s translation for %r; showing English", language, key)
    return value


def _format(text: str, kwargs: dict[str, Any], language: str) -> str:
    if not kwargs:
        return text
    loc = babel_locale(language)
    shown = {k: (format_decimal(v, locale=loc) if isinstance(v, int) and not isinstance(v, bool) else v)
             for k, v in kwargs.items()}
    return text.format(**shown)


def t(key: str, /, language: str | None = None, **kwargs: Any) -> str:
    """The text of ``key`` (or a :class:`Msg`) in ``language`` (default: :func:`lang`), its
    ``{placeholders}`` filled from ``kwargs`` (ints with the language's digit grouping).
    A key missing in that language falls back to English (logged); an unknown key raises
    ``KeyError``."""
    language = language or lang()
    name = key.key if isinstance(key, Msg) else key
    value = _lookup(name, language)
    if isinstance(value, dict):  # a plural entry used without a count
        value = value.get("other", "")
    return _format(str(value), kwargs, language)


def tn(key: str, n: int, /, language: str | None = None, **kwargs: Any) -> str:
    """The plural form of ``key`` for count ``n`` in ``language`` (CLDR category from Babel's
    plural rules: English "1 conversation" / "2 conversations", Chinese one form), with ``{n}``
    and ``kwargs`` filled in."""
    language = language or lang()
    value = _lookup(key, language)
    if isinstance(value, dict):
        category = babel_locale(language).plural_form(abs(n))
        value = value.get(category, value.get("other", ""))
    return _format(str(value), {"n": n, **kwargs}, language)


def localize(text: Any) -> Any:
    """:func:`t` of a :class:`Msg`; anything else (an error's own sentence, None) as is."""
    return t(text) if isinstance(text, Msg) else text


def placeholders(text: str) -> set[str]:
    """The ``{names}`` of a catalogue string (for the catalogue's own tests)."""
    return {name for _lit, name, _spec, _conv in string.Formatter().parse(text) if name is not None}


def variants(key: str) -> set[str]:
    """The text of plain-string ``key`` (or :class:`Msg`) in every language: what a control
    labelled in any tab's language may send back (e.g. a chat menu option)."""
    name = key.key if isinstance(key, Msg) else key
    return {str(cat[name]) for cat in catalogues().values() if isinstance(cat.get(name), str)}
