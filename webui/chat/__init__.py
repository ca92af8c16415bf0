"""Layer ``chat``: the operations behind the page over :class:`~webui.chat.context.WebContext` and core —
sessions, send, versions, approvals, compaction, memory, search, import, sub-agents, titles, export.
Plain functions, no Gradio; imports ``render``, ``text``, ``server`` and ``i18n``."""
