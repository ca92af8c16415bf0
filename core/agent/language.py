"""Which language a conversation is held in, so model-written text (titles, compaction summaries,
memories) follows the conversation rather than the UI or the model's habit (issue 20).

Detection is cheap and offline, in two steps:

1. **Script**, by Unicode ranges: Chinese characters, Japanese kana and Hangul decide between
   Chinese, Japanese and Korean (a kana-free run of Chinese characters is Chinese; a few kana
   make it Japanese; Hangul is Korean), and a handful of common characters that differ between
   the two Chinese scripts tell Simplified from Traditional. Greek, Hebrew, Thai, Georgian,
   Armenian, Lao, Khmer, Myanmar and Ethiopic scripts name one language each. CJK characters
   count one unit each and words of other scripts one unit per word, and a non-Latin script
   wins from 15% of the units: English words inside a Chinese message (code, names, a pasted
   log) do not make it English, while Chinese characters never appear in an English one by
   accident.
2. **Language within a script** (Latin, Cyrillic, Arabic, Devanagari) with ``py3langid`` (the
   langid.py model, bundled in its wheel, no download), restricted to the languages written in
   that script and accepted only above :data:`MIN_CONFIDENCE` — "fix bug" says nothing.

Code is not language: fenced and inline code, URLs and dotted/underscored identifiers are removed
first. The user's own messages decide (newest first); the assistant's text only when the user's
say nothing. When nothing is certain the prompts still ask for "the same language as the
conversation" — the model sees the text — without naming one.
"""
from __future__ import annotations

import logging
import re
import threading
import unicodedata
from dataclasses import dataclass
from typing import Any, Iterable

from core.session.export import message_text

log = logging.getLogger(__name__)

MIN_CONFIDENCE = 0.5      # py3langid's normalised probability within the script's languages
NON_LATIN_SHARE = 0.15    # of the units, for a non-Latin script to win over Latin words
MAX_CHARS = 4_000         # of cleaned text looked at (newest messages first)
MAX_CHARS_PER_MESSAGE = 1_000
OWN_WORDS_MESSAGES = 8    # the newest user messages whose first/last lines are looked at
MIN_LETTERS = 6           # fewer letters than this decide nothing


@dataclass(frozen=True)
class Language:
    """A detected language: ``code`` (a BCP 47 tag: ``"en"``, ``"zh-Hans"``, ``"ja"``) and
    ``name`` (its English name, as said in a prompt: ``"Chinese (Simplified)"``)."""

    code: str
    name: str


# English names of the languages py3langid may answer with (restricted to these, by script).
_NAMES = {
    "en": "English", "es": "Spanish", "fr": "French", "de": "German", "it": "Italian", "pt": "Portuguese",
    "nl": "Dutch", "sv": "Swedish", "da": "Danish", "no": "Norwegian", "fi": "Finnish", "pl": "Polish",
    "cs": "Czech", "sk": "Slovak", "hu": "Hungarian", "ro": "Romanian", "tr": "Turkish", "id": "Indonesian",
    "ms": "Malay", "vi": "Vietnamese", "ca": "Catalan", "hr": "Croatian", "sl": "Slovenian", "et": "Estonian",
    "lv": "Latvian", "lt": "Lithuanian", "tl": "Tagalog", "sw": "Swahili", "af": "Afrikaans",
    "ru": "Russian", "uk": "Ukrainian", "bg": "Bulgarian", "sr": "Serbian", "be": "Belarusian",
    "kk": "Kazakh", "mk": "Macedonian", "mn": "Mongolian",
    "ar": "Arabic", "fa": "Persian", "ur": "Urdu",
    "hi": "Hindi", "mr": "Marathi", "ne": "Nepali",
}
_BY_SCRIPT = {
    "latin": ("en", "es", "fr", "de", "it", "pt", "nl", "sv", "da", "no", "fi", "pl", "cs", "sk", "hu", "ro",
              "tr", "id", "ms", "vi", "ca", "hr", "sl", "et", "lv", "lt", "tl", "sw", "af"),
    "cyrillic": ("ru", "uk", "bg", "sr", "be", "kk", "mk", "mn"),
    "arabic": ("ar", "fa", "ur"),
    "devanagari": ("hi", "mr", "ne"),
}
# Scripts that name one language (Unicode block ranges).
_ONE_LANGUAGE = {
    "greek": Language("el", "Greek"), "hebrew": Language("he", "Hebrew"), "thai": Language("th", "Thai"),
    "georgian": Language("ka", "Georgian"), "armenian": Language("hy", "Armenian"),
    "lao": Language("lo", "Lao"), "khmer": Language("km", "Khmer"), "myanmar": Language("my", "Burmese"),
    "ethiopic": Language("am", "Amharic"), "bengali": Language("bn", "Bengali"),
    "tamil": Language("ta", "Tamil"), "telugu": Language("te", "Telugu"),
}
_RANGES = [  # (first, last, script), sorted
    (0x0370, 0x03FF, "greek"), (0x0400, 0x052F, "cyrillic"), (0x0530, 0x058F, "armenian"),
    (0x0590, 0x05FF, "hebrew"), (0x0600, 0x06FF, "arabic"), (0x0750, 0x077F, "arabic"),
    (0x0900, 0x097F, "devanagari"), (0x0980, 0x09FF, "bengali"), (0x0B80, 0x0BFF, "tamil"),
    (0x0C00, 0x0C7F, "telugu"), (0x0E00, 0x0E7F, "thai"), (0x0E80, 0x0EFF, "lao"),
    (0x1000, 0x109F, "myanmar"), (0x10A0, 0x10FF, "georgian"), (0x1100, 0x11FF, "hangul"),
    (0x1200, 0x139F, "ethiopic"), (0x1780, 0x17FF, "khmer"), (0x1F00, 0x1FFF, "greek"),
    (0x3040, 0x30FF, "kana"), (0x3130, 0x318F, "hangul"), (0x31F0, 0x31FF, "kana"),
    (0x3400, 0x4DBF, "han"), (0x4E00, 0x9FFF, "han"), (0xA960, 0xA97F, "hangul"),
    (0xAC00, 0xD7AF, "hangul"), (0xF900, 0xFAFF, "han"), (0xFB50, 0xFDFF, "arabic"),
    (0xFE70, 0xFEFF, "arabic"), (0xFF66, 0xFF9F, "kana"), (0x20000, 0x2FA1F, "han"),
]
_CJK = ("han", "kana", "hangul")
# Common characters written differently in the two Chinese scripts (simplified, traditional).
_PAIRS = ("这這 个個 们們 说說 时時 会會 来來 对對 为為 么麼 国國 后後 发發 开開 问問 题題 没沒 还還 过過 见見 "
          "里裡 样樣 现現 经經 长長 门門 东東 车車 书書 学學 写寫 让讓 给給 认認 识識 话話 请請 谢謝 应應 该該 "
          "动動 实實 体體 关關 点點 网網 简簡 码碼 数數 据據 错錯 误誤 读讀 试試 测測 语語 库庫 运運 换換 项項 "
          "页頁 图圖 区區 间間 无無 从從 与與 两兩 变變 显顯 处處 务務 机機 进進 线線 类類 结結 构構 编編 "
          "译譯 环環 选選 单單 号號 输輸 传傳 载載 录錄 态態 节節 总總 统統 视視 边邊 设設 计計 报報 帮幫 "
          "几幾 吗嗎 码碼 件件 户戶 务務 帐帳 执執 该該 复複 杂雜 难難 属屬 获獲 册冊")
_SIMPLIFIED = {p[0] for p in _PAIRS.split() if p[0] != p[1]}
_TRADITIONAL = {p[1] for p in _PAIRS.split() if p[0] != p[1]}
_SIMPLIFIED, _TRADITIONAL = _SIMPLIFIED - _TRADITIONAL, _TRADITIONAL - _SIMPLIFIED

_FENCED = re.compile(r"```.*?(```|$)|~~~.*?(~~~|$)", re.DOTALL)
_INLINE = re.compile(r"`[^`\n]*`")
# ASCII only: Chinese or Japanese text runs on without spaces right after a URL or a name.
_URL = re.compile(r"\b(?:https?|ftp|file)://[!-~]+|\bwww\.[!-~]+")
# Identifiers and paths: ASCII words joined by _ . / \ :: or digits (parse_line, core.jsonl_io, a/b.py).
# Runs are found first and judged by a function: one pattern doing both backtracks quadratically.
_IDENT_RUN = re.compile(r"[A-Za-z0-9_$./\\:-]+")
_IDENT_MARK = re.compile(r"[_/\\$]|\.[A-Za-z0-9]|::|[A-Za-z]\d|\d[A-Za-z]")


def _drop_identifier(match: re.Match) -> str:
    return " " if _IDENT_MARK.search(match.group()) else match.group()


def _script(ch: str) -> str | None:
    cp = ord(ch)
    if cp < 0x0250:
        return "latin" if ch.isalpha() else None
    lo, hi = 0, len(_RANGES) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        first, last, name = _RANGES[mid]
        if cp < first:
            hi = mid - 1
        elif cp > last:
            lo = mid + 1
        else:
            return name
    if 0x1E00 <= cp <= 0x1EFF:  # Latin Extended Additional (Vietnamese)
        return "latin"
    return None


def strip_code(text: str) -> str:
    """``text`` without fenced/inline code, URLs and identifier-like words (which say nothing
    about the language the person writes in)."""
    text = _FENCED.sub(" ", text)
    text = _INLINE.sub(" ", text)
    text = _URL.sub(" ", text)
    return _IDENT_RUN.sub(_drop_identifier, text)


def _units(text: str) -> tuple[dict[str, int], dict[str, str]]:
    """Units per script (CJK characters one each, other scripts one per word) and, per script,
    the text written in it (for the model of step 2)."""
    units: dict[str, int] = {}
    parts: dict[str, list[str]] = {}
    word_script: str | None = None
    word: list[str] = []

    def end_word() -> None:
        nonlocal word_script
        if word_script is not None and word:
            units[word_script] = units.get(word_script, 0) + 1
            parts.setdefault(word_script, []).append("".join(word))
        word.clear()
        word_script = None

    for ch in unicodedata.normalize("NFC", text):
        script = _script(ch)
        if script in _CJK:
            end_word()
            units[script] = units.get(script, 0) + 1
            parts.setdefault(script, []).append(ch)
        elif script is not None or (word and unicodedata.category(ch).startswith("M")):
            if script is not None and script != word_script:
                end_word()
                word_script = script
            word.append(ch)
        else:
            end_word()
    end_word()
    return units, {k: " ".join(v) if k not in _CJK else "".join(v) for k, v in parts.items()}


_identifier: Any = None
_identifier_lock = threading.Lock()


def _langid() -> Any:
    """The py3langid identifier (normalised probabilities), loaded once (about half a second);
    None when the package is missing (logged once)."""
    global _identifier
    with _identifier_lock:
        if _identifier is None:
            try:
                from py3langid.langid import MODEL_FILE, LanguageIdentifier

                found = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
                found.set_languages(sorted({c for codes in _BY_SCRIPT.values() for c in codes}))
                _identifier = found
            except Exception as err:  # noqa: BLE001 -- detection is a hint; prompts work without it
                log.warning("language detection of Latin/Cyrillic/Arabic text is off: %s", err)
                _identifier = False
        return _identifier or None


def warm_up() -> threading.Thread:
    """Load the py3langid model in a daemon thread (about half a second), so the first title of
    a freshly started app is not held up by it; returns the thread."""
    thread = threading.Thread(target=_langid, name="anycode-language-model", daemon=True)
    thread.start()
    return thread


def _within_script(script: str, text: str) -> Language | None:
    identifier = _langid()
    if identifier is None:
        return None
    allowed = set(_BY_SCRIPT[script])
    with _identifier_lock:  # the identifier keeps per-call scratch state
        ranked = [(code, p) for code, p in identifier.rank(text) if code in allowed]
    total = sum(p for _, p in ranked)
    if not ranked or total <= 0:
        return None
    code, p = max(ranked, key=lambda cp: cp[1])
    if p / total < MIN_CONFIDENCE:
        log.debug("language of %r undecided (%s at %.2f)", text[:60], code, p / total)
        return None
    return Language(code, _NAMES[code])


def _chinese(text: str) -> Language:
    simplified = sum(ch in _SIMPLIFIED for ch in text)
    traditional = sum(ch in _TRADITIONAL for ch in text)
    if simplified > traditional:
        return Language("zh-Hans", "Chinese (Simplified)")
    if traditional > simplified:
        return Language("zh-Hant", "Chinese (Traditional)")
    return Language("zh", "Chinese")


def detect_language(text: str) -> Language | None:
    """The language ``text`` is written in, or None when it cannot be told (too little prose,
    only code, an unsure model). Rules in the module docstring. Never raises."""
    units, parts = _units(strip_code(text or ""))
    total = sum(units.values())
    if not total:
        return None
    cjk = sum(units.get(s, 0) for s in _CJK)
    others = {s: n for s, n in units.items() if s not in _CJK and s != "latin"}
    best_other = max(others, key=others.get) if others else None
    if cjk and cjk >= NON_LATIN_SHARE * total and cjk >= (others.get(best_other, 0) if best_other else 0):
        han, kana, hangul = units.get("han", 0), units.get("kana", 0), units.get("hangul", 0)
        if hangul and hangul >= kana and hangul >= 0.3 * cjk:
            return Language("ko", "Korean")
        if kana and kana >= max(1, 0.05 * (han + kana)):
            return Language("ja", "Japanese")
        if han:
            return _chinese(parts.get("han", ""))
        return Language("ko", "Korean") if hangul else Language("ja", "Japanese")
    if best_other and others[best_other] >= NON_LATIN_SHARE * total:
        if best_other in _ONE_LANGUAGE:
            return _ONE_LANGUAGE[best_other]
        if sum(len(w) for w in parts[best_other].split()) >= MIN_LETTERS:
            return _within_script(best_other, parts[best_other])
        return None
    latin = parts.get("latin", "")
    if sum(len(w) for w in latin.split()) < MIN_LETTERS:
        return None
    return _within_script("latin", latin)


def _texts(messages: Iterable[Any], role: str) -> str:
    """The cleaned text of ``role``'s messages, newest first, within :data:`MAX_CHARS`."""
    out: list[str] = []
    size = 0
    for m in reversed(list(messages)):
        if not isinstance(m, dict) or m.get("role") != role:
            continue
        # Cut before cleaning: a pasted megabyte is not read whole (its start tells as much).
        text = strip_code(message_text(m.get("content"))[:2 * MAX_CHARS_PER_MESSAGE])[:MAX_CHARS_PER_MESSAGE].strip()
        if text:
            out.append(text)
            size += len(text)
            if size >= MAX_CHARS:
                break
    return "\n".join(out)


def _own_words(text: str) -> Language | None:
    """The language of a message's first or last line when it is written in a non-Latin script
    (at least 4 units, most of the line): the person's own words around a pasted English log or
    listing, which would otherwise outweigh them."""
    head = [line for line in strip_code(text[:MAX_CHARS_PER_MESSAGE]).splitlines() if line.strip()][:1]
    tail = [line for line in strip_code(text[-MAX_CHARS_PER_MESSAGE:]).splitlines() if line.strip()][-1:]
    for line in head + tail:
        units, _ = _units(line)
        other = sum(units.values()) - units.get("latin", 0)
        if other >= 4 and other >= 0.5 * sum(units.values()):
            return detect_language(line)
    return None


def conversation_language(messages: Iterable[Any]) -> Language | None:
    """The language of a conversation (OpenAI-shaped ``messages``): the language of the newest
    user message whose first or last line is in a non-Latin script (a question in Chinese above
    a pasted English log), else of its user messages together (newest first, code left out),
    else of its assistant messages; None when nothing tells. Never raises."""
    messages = list(messages or ())
    try:
        users = [m for m in reversed(messages) if isinstance(m, dict) and m.get("role") == "user"]
        for m in users[:OWN_WORDS_MESSAGES]:
            found = _own_words(message_text(m.get("content")))
            if found is not None:
                return found
        for role in ("user", "assistant"):
            found = detect_language(_texts(messages, role))
            if found is not None:
                return found
    except Exception:  # noqa: BLE001 -- a hint for a prompt must never break a request
        log.exception("language detection failed")
    return None


def language_instruction(what: str, language: Language | None) -> str:
    """One sentence for a prompt asking for ``what`` (e.g. ``"the title"``) in the conversation's
    language: ``"Write the title in Chinese (Simplified), the language of the conversation."``, or
    without a detected language ``"Write the title in the same language as the conversation
    (the language the user writes in), whatever language these instructions are in."``"""
    if language is None:
        return (f"Write {what} in the same language as the conversation (the language the user writes in), "
                "whatever language these instructions are in.")
    return f"Write {what} in {language.name}, the language of the conversation."
