"""The Rewind card (issue 29): "Rewind to here" in a message's menu opens it under the chat, like the
approval card — the files that would change (a sentence and a diff each), the files changed
outside anycode with a checkbox each, and three choices: conversation and files, conversation
only, files only. After a rewind, "Undo rewind" puts the files back as they were just before.

Thin over :mod:`webui.chat.rewind`. The diff is shown in a ``gr.Code`` (plain text, never HTML),
so a diff of an HTML file cannot inject markup; file paths in the Markdown list are escaped.
"""
from __future__ import annotations

import logging
from typing import Any

import gradio as gr

from core.errors import AnycodeError
from webui import i18n
from webui.chat import handlers, rewind
from webui.gui.i18n_ui import tr
from webui.i18n import Msg, t
from webui.text.error_text import describe

log = logging.getLogger(__name__)

REWIND_OPTION = Msg("rewind_to_here")
CHOICES = ("both", "conversation", "files")


def _escape_md(text: str) -> str:
    return "".join("\\" + ch if ch in "\\`*_{}[]()#+-.!|<>&~" else ch for ch in text)


def build_rewind_card() -> dict[str, Any]:
    """Create the card (hidden) and the Undo rewind button where this is called; the parts for
    :func:`wire_rewind_card`."""
    with gr.Column(visible=False, elem_id="ac-rewind") as card:
        head = gr.Markdown("", elem_id="ac-rewind-head")
        lines = gr.Markdown("", elem_id="ac-rewind-files")
        diff = gr.Code("", language=None, interactive=False, show_label=False, lines=3, max_lines=24,
                       elem_id="ac-rewind-diff", show_line_numbers=False, wrap_lines=True, visible=False)
        outside = gr.CheckboxGroup(choices=[], value=[], label=tr("rewind_outside_label"), visible=False,
                                   elem_id="ac-rewind-outside")
        with gr.Row(elem_id="ac-rewind-buttons"):
            both = gr.Button(tr("rewind_both"), variant="primary", size="sm", elem_id="ac-rewind-both")
            conversation = gr.Button(tr("rewind_conversation"), size="sm", elem_id="ac-rewind-conversation")
            files = gr.Button(tr("rewind_files"), size="sm", elem_id="ac-rewind-files-only")
            cancel = gr.Button(tr("cancel"), size="sm", elem_id="ac-rewind-cancel")
    undo = gr.Button(tr("rewind_undo"), visible=False, size="sm", elem_id="ac-rewind-undo")
    target = gr.State(None)  # the stored message index the card shows (answers name it)
    return {"card": card, "head": head, "lines": lines, "diff": diff, "outside": outside, "both": both,
            "conversation": conversation, "files": files, "cancel": cancel, "undo": undo, "target": target}


def card_outputs(parts: dict[str, Any]) -> list[Any]:
    """The components a handler sets to show or hide the card (:func:`shown_card`, :func:`hidden_card`)."""
    return [parts["card"], parts["head"], parts["lines"], parts["diff"], parts["outside"], parts["target"],
            parts["files"]]


def hidden_card() -> tuple:
    """:func:`card_outputs` values that close the card."""
    return (gr.Column(visible=False), gr.skip(), gr.skip(), gr.skip(), gr.CheckboxGroup(visible=False), None,
            gr.skip())


_hidden_card = hidden_card


def shown_card(c: rewind.RewindCard, target: Any, intro: str, *, files_choice: bool = True) -> tuple:
    """:func:`card_outputs` values that open the card for ``c``; ``target``: what its answer
    carries (a message index for Rewind to here; a dict for an Edit or Regenerate, which offer
    no "files only": :func:`webui.chat.rewind.replaced_turn`)."""
    listed = "\n".join(f"- {_escape_md(line)}" for line in c.lines)
    return (gr.Column(visible=True), f"**{_escape_md(c.title)}**\n\n{_escape_md(intro)}", listed,
            gr.Code(value=c.diff, visible=bool(c.diff)),
            gr.CheckboxGroup(choices=c.outside, value=[], visible=bool(c.outside)), target,
            gr.Button(visible=files_choice))


def wire_rewind_card(p: Any, parts: dict[str, Any], tab_key: Any) -> None:
    """Bind the card to the chat's message menu (``p``: the app's :class:`webui.gui.app.Page`;
    ``tab_key(request, tab_id)``: a tab's key, as the app computes it). The answers to an Edit's
    or Regenerate's card are bound by :mod:`webui.gui.versions`."""
    ctx = p.ctx
    card_outs = card_outputs(parts)

    def on_option(st, evt: gr.LikeData):
        if evt.liked not in i18n.variants(REWIND_OPTION.key) or not (st or {}).get("session"):
            return tuple(gr.skip() for _ in card_outs)
        index = evt.index[0] if isinstance(evt.index, (list, tuple)) else evt.index
        try:
            message = rewind.message_of_row(ctx, st, int(index))
            c = rewind.card(ctx, st, message)
        except (AnycodeError, IndexError, OSError) as err:
            gr.Warning(describe(err), title="anycode")
            return _hidden_card()
        return shown_card(c, message, t("rewind_intro"))

    p.chat.like(on_option, [p.state], card_outs, api_visibility="private")
    parts["cancel"].click(_hidden_card, None, card_outs, api_visibility="private")

    outputs = [*p.view_outputs, p.box, *card_outs, parts["undo"]]
    for mode in CHOICES:
        def on_choice(tab_id, st, message, chosen, query, archived, request: gr.Request, mode=mode):
            if message is None or isinstance(message, dict):
                # A dict: an Edit's or Regenerate's card, answered by webui.gui.versions; None: that
                # answer already ran (a gr.State is read when a listener runs, not at the click).
                # Not even the tab's runs are stopped here: the reply that answer starts would be
                # cut short.
                return tuple(gr.skip() for _ in outputs)
            handlers.leave(ctx, tab_key(request, tab_id))  # as Page.switching does
            view = rewind.apply(ctx, st, int(message), mode, list(chosen or []))
            return (*p.show(view, query, archived), gr.Textbox(submit_btn=True, stop_btn=False), *_hidden_card(),
                    gr.Button(visible=rewind.can_undo(ctx, view.state)))

        parts[mode].click(on_choice, [p.tab, p.state, parts["target"], parts["outside"], p.search, p.show_archived], outputs,
                          concurrency_limit=1, api_visibility="private")

    def on_undo(st, query, archived):
        view = rewind.undo(ctx, st) if (st or {}).get("session") else handlers.reload(ctx, st or {})
        return (*p.show(view, query, archived), gr.Textbox(submit_btn=True, stop_btn=False), *_hidden_card(),
                gr.Button(visible=rewind.can_undo(ctx, view.state)))

    parts["undo"].click(p.switching(on_undo), [p.tab, p.state, p.search, p.show_archived], outputs,
                        concurrency_limit=1, api_visibility="private")
    # Opening another chat: Undo shows when that chat has a rewind to undo; the card closes.
    p.sid_box.change(lambda st: (gr.Button(visible=rewind.can_undo(ctx, st or {})), gr.Column(visible=False)),
                     [p.state], [parts["undo"], parts["card"]], api_visibility="private")
