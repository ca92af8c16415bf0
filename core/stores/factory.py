"""Open one store from a spec; :func:`core.storage.open_store` opens the configured storage with it.

- ``ANYCODE_STORE`` (or ``--store``): ``jsonl`` (default: JSONL files under the data dir),
  ``jsonl:PATH`` (JSONL files under another base folder), or a database URL
  (``sqlite:///PATH``, ``postgresql+psycopg://user@host/db``; ``postgres://`` also accepted).
  A relative SQLite path (``sqlite:///sessions.db``) is taken inside the data dir, not the
  current folder; ``sqlite:////abs/path.db`` is absolute.
- ``s3://BUCKET/PREFIX`` (:mod:`core.stores.s3_store`, extra ``[s3]``) and ``redis://HOST:PORT/DB``
  or ``rediss://…`` (:mod:`core.stores.redis_store`, extra ``[redis]``), usually as the mirror.
- ``ANYCODE_MIRROR`` (optional): a second store spec (a database, S3 or Redis URL) that receives a
  copy of every write in the background (:class:`core.stores.mirror.MirroredSessionStore`); the primary
  stays the source of truth and a failing mirror never fails or slows a write.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

from core import settings
from core.errors import StoreUnavailable
from core.stores.backend import Backend
from core.stores.jsonl_store import LocalSessionStore

log = logging.getLogger(__name__)

STORE_ENV = "ANYCODE_STORE"
MIRROR_ENV = "ANYCODE_MIRROR"
DEFAULT_SPEC = "jsonl"


def describe(spec: str) -> str:
    """``spec`` with any password in a URL masked, for logs and messages."""
    if "://" not in spec:
        return spec
    try:
        from sqlalchemy.engine import make_url

        return make_url(spec).render_as_string(hide_password=True)
    except Exception:  # not a parsable URL, or SQLAlchemy missing: show the scheme only
        return spec.split("://", 1)[0] + "://…"


def effective_spec(spec: str | None, variable: str = STORE_ENV) -> str:
    """``spec`` when given, else ``$variable`` (``ANYCODE_STORE`` or ``ANYCODE_MIRROR``), stripped;
    for the store an empty answer means :data:`DEFAULT_SPEC`, for the mirror none."""
    return (spec if spec is not None else os.environ.get(variable, "")).strip()


def store_from_spec(spec: str, base_dir: str | os.PathLike[str] | None = None) -> Backend:
    """Open one store (no mirroring) from a spec: ``jsonl``, ``jsonl:PATH`` or a database URL.

    ``base_dir`` is the data dir (default :func:`core.settings.data_dir`): the JSONL base folder
    for plain ``jsonl`` and the folder relative SQLite paths are taken in. Raises
    :class:`StoreUnavailable` for an unknown spec, a missing ``anycode[sql]`` extra or an
    unreachable database."""
    spec = spec.strip()
    if spec in ("", DEFAULT_SPEC):
        return LocalSessionStore(base_dir)
    if spec.startswith("jsonl:") and "://" not in spec:
        return LocalSessionStore(Path(spec[len("jsonl:"):]).expanduser())
    if spec.startswith("s3://"):
        from core.stores.s3_store import S3SessionStore

        return S3SessionStore(spec)
    if spec.startswith(("redis://", "rediss://")):
        from core.stores.redis_store import RedisSessionStore

        return RedisSessionStore(spec)
    if "://" in spec:
        from core.stores.sql_store import SqlSessionStore

        return SqlSessionStore(_anchor_sqlite(spec, base_dir))
    raise StoreUnavailable(
        f"Unknown session store {spec!r}: use 'jsonl', 'jsonl:/some/folder', "
        "'sqlite:///path/to/sessions.db', 'postgresql+psycopg://user@host/db', "
        "'s3://bucket/prefix' or 'redis://host:6379/0'."
    )


def _anchor_sqlite(spec: str, base_dir: str | os.PathLike[str] | None) -> str:
    # A relative SQLite path in a setting would otherwise mean "relative to wherever anycode was
    # started", a different database per project folder; anchor it in the data dir instead.
    if not spec.startswith("sqlite:"):
        return spec
    try:
        from sqlalchemy.engine import make_url
    except ImportError:
        return spec  # SqlSessionStore reports the missing extra
    u = make_url(spec)
    db = u.database
    if not db or db == ":memory:" or db.startswith("file:") or db.startswith("~") or os.path.isabs(db):
        return spec
    base = Path(base_dir) if base_dir is not None else settings.data_dir()
    return u.set(database=str(base / db)).render_as_string(hide_password=False)
