"""Bring history in from other tools: ChatGPT data exports, Claude Code and Codex sessions.

Each importer reads its format into :class:`~core.importers.base.ImportedSession` objects;
:func:`~core.importers.base.import_sessions` writes them into any session store, idempotently
and whole-or-absent. Imports :mod:`core.session` and :mod:`core.stores`; never :mod:`core.agent`.
"""
