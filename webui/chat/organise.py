"""Pins and tags on the page (issue 31, items 13 and 14): the sidebar rows' menu (Pin / Unpin,
Edit tags…), the open chat's tag bar under the title, and filtering the list by a tag.

A conversation's pin and tags are entries appended to its family root
(:meth:`core.session.manager.SessionManager.pin` / ``tag``), so the sidebar, every version and
``anycode sessions`` agree. Two tabs at once: both writes are kept; per field the last one
appended wins (a pin), and tags are per-tag changes (tab A adding "work" while tab B adds "urgent"
keeps both). A tag edit sends the whole new list, and only the difference with what the store
holds *now* is written, so a tag another tab added meanwhile is kept unless this tab's list
removed it after showing it.

Plain functions over :class:`~webui.chat.context.WebContext` (no Gradio): :func:`apply` runs one
action the page's script sends, :func:`tag_bar_html` renders the tag bar. The script is
``assets/js/organise.js``, placed and wired by :mod:`webui.gui.organise`.
"""
from __future__ import annotations

import html
import json
import logging
import re
from typing import TYPE_CHECKING, Any

from core.errors import AnycodeError, InvalidTag, SessionNotFound
from core.session.entries import clean_tag
from core.session.keys import SessionKey
from webui.i18n import t
from webui.render.rows import PIN_ICON, tag_chip
from webui.text.error_text import describe

if TYPE_CHECKING:
    from webui.chat.context import WebContext

log = logging.getLogger(__name__)

ACTIONS = ("pin", "unpin", "tags", "add_tags", "untag")
_SPLIT = re.compile(r"[,，、;；\n]+")


def parse_tags(text: str) -> list[str]:
    """The tags typed in the "Edit tags" box: separated by commas (also Chinese ，、；
    and semicolons), each cleaned (:func:`~core.session.entries.clean_tag`), duplicates dropped.
    Raises :class:`~core.errors.InvalidTag` for a part that cannot be a tag."""
    good, refused = split_tags_typed(text)
    if refused:
        raise refused[0][1]
    return good


def split_tags_typed(text: str) -> tuple[list[str], list[tuple[str, InvalidTag]]]:
    """:func:`parse_tags` that keeps going: ``(the tags that can be, [(a part as typed, why it
    cannot be a tag)])``. The page saves the first and names the second (trial 12: one bad part
    threw the whole list away, and the prompt with it)."""
    good: list[str] = []
    refused: list[tuple[str, InvalidTag]] = []
    for part in _SPLIT.split(text or ""):
        part = part.strip().lstrip("#")
        if not part.strip():
            continue
        try:
            good.append(clean_tag(part))
        except InvalidTag as err:
            refused.append((part, err))
    return list(dict.fromkeys(good)), refused


def _key(ctx: WebContext, state: dict[str, Any], sid: str) -> SessionKey:
    project = state.get("project") or ctx.project_key
    last: AnycodeError | None = None
    for pk in [project, *ctx.alias_keys(project)]:  # a row of the same project on another machine
        try:
            return ctx.manager.find(pk, sid)
        except AnycodeError as err:
            last = err
    raise last  # type: ignore[misc]


def apply(ctx: WebContext, state: dict[str, Any], data: Any) -> str | None:
    """Run one action the page sent: ``{"action": "pin" | "unpin", "sid"}``, ``{"action":
    "tags", "sid", "tags": "a, b"}`` (the whole new list: the difference with the stored tags is
    written), ``{"action": "add_tags", "sid", "tags": "a, b"}``, ``{"action": "untag", "sid",
    "tag"}``. Returns None when done, else the sentence to show (a bad tag, a chat deleted
    meanwhile, a store down); a malformed action is logged and ignored (None)."""
    try:
        if isinstance(data, str):
            data = json.loads(data)
        action, sid = str(data["action"]), str(data["sid"])
    except (ValueError, TypeError, KeyError) as err:
        log.warning("bad organise action %r: %s", data, err)
        return None
    if action not in ACTIONS or not sid:
        log.warning("unknown organise action %r", data)
        return None
    try:
        key = _key(ctx, state, sid)
        if action in ("pin", "unpin"):
            ctx.manager.pin(key, action == "pin")
        elif action == "untag":
            ctx.manager.tag(key, remove=[str(data.get("tag", ""))])
        else:
            wanted, refused = split_tags_typed(str(data.get("tags", "")))
            if refused and not wanted:
                raise refused[0][1]  # nothing typed can be a tag: nothing changes (not "remove all")
            if action == "add_tags":
                ctx.manager.tag(key, add=wanted)
            else:
                have = ctx.manager.pin_and_tags(key)[1]
                ctx.manager.tag(key, add=[x for x in wanted if x not in have],
                                remove=[x for x in have if x not in wanted])
            if refused:  # the valid ones are saved, the others named (none silently dropped)
                return _left_out(refused)
    except InvalidTag as err:
        return describe(err)
    except SessionNotFound as err:  # the row's chat was deleted in another tab or process
        log.info("organise %s on %s: gone (%s)", action, sid, err)
        return t("err_chat_deleted")
    except (AnycodeError, OSError) as err:
        log.warning("organise %s on %s failed: %s", action, sid, err)
        return describe(err) if isinstance(err, AnycodeError) else str(err)
    return None


def _left_out(refused: list[tuple[str, InvalidTag]]) -> str:
    """The sentence naming the typed parts that were not saved as tags (quoted as typed, cut
    to 40 characters each)."""
    shown = ", ".join(f"“{p if len(p) <= 40 else p[:39] + '…'}”" for p, _ in refused)
    return t("tags_left_out", tags=shown)


def tag_bar_html(ctx: WebContext, state: dict[str, Any] | None) -> str:
    """The open chat's tag bar (under the title): its tags as chips, each with its × (remove),
    then "+ Tag"; empty for a new chat. ``data-sid`` names the conversation shown; the labels of
    the prompt ride along (``data-prompt``) for the page's script."""
    sid = (state or {}).get("session")
    if not sid:
        return ""
    try:
        pinned, tags = ctx.manager.pin_and_tags(_key(ctx, state or {}, sid))
    except (AnycodeError, OSError) as err:
        log.debug("no tag bar for %s: %s", sid, err)
        return ""
    chips = "".join(tag_chip(tag, removable=True) for tag in tags)
    pin = (f'<span class="ac-pin" role="img" aria-label="{html.escape(t("pinned_badge"))}" '
           f'title="{html.escape(t("pinned_badge"))}">{PIN_ICON}</span>' if pinned else "")
    return (f'<div class="ac-tagbar" role="group" aria-label="{html.escape(t("tags_label"))}" '
            f'data-sid="{html.escape(sid)}" data-prompt="{html.escape(t("tags_prompt"))}">{pin}{chips}'
            f'<button type="button" class="ac-add-tag" data-add-tag="1">{html.escape(t("add_tag"))}</button></div>')
