"""The session model (the design article's middle layer): keys, entries and their fold, the
``Session``/``SessionMeta`` models, the ``SessionStore`` protocol, the manager and export.

Imports nothing from :mod:`core.stores` or :mod:`core.agent` (the one-way rule).
"""
