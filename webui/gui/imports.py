"""The sidebar's "Import…" upload button (the plain functions are :mod:`webui.chat.imports`)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import gradio as gr

from core.errors import AnycodeError
from webui.chat import handlers
from webui.chat.imports import FILE_TYPES, import_upload
from webui.gui.i18n_ui import tr

if TYPE_CHECKING:
    from webui.chat.context import WebContext


def build_import_button(ctx: WebContext, *, state: Any, search: Any, show_archived: Any, sessions: Any,
                        notify: Any) -> Any:
    """Place the "Import…" upload button (call inside the sidebar) and wire it: after an import
    the session list is refreshed and a toast gives the summary. Returns the button."""
    button = gr.UploadButton(tr("import_button"), file_types=FILE_TYPES, file_count="single", size="sm",
                             variant="secondary", elem_id="ac-import")

    def on_upload(file, st, query, archived):
        project = (st or {}).get("project") or ctx.project_key
        try:
            cwd = handlers.project_cwd(ctx, project)
        except AnycodeError:
            cwd = ctx.project_path
        summary, report = import_upload(ctx, file, cwd)
        notify(summary, "info" if report is not None and report.ok and report.imported else "warning")
        return handlers.session_list_html(ctx, project, query=query or "", archived=bool(archived),
                                          active=(st or {}).get("session"))

    button.upload(on_upload, [button, state, search, show_archived], [sessions],
                  api_visibility="private", show_progress="minimal")
    return button

