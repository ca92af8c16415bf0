"""Session storage backends and what moves data between them: the JSONL store and its line I/O,
the SQL store and its schema, the mirror and its outbox, the store factory, migrate.

Imports :mod:`core.session`, never :mod:`core.agent`. SQLAlchemy is imported lazily by the modules
that need it, so ``import core`` works without the ``sql`` extra.
"""
