"""The Storage contract: every store kind's storage gives the services beside its sessions, each
built once per storage; a mirrored storage's services are its local store's, as they were before
the storage held them.

Run against every store in ``STORE_FACTORIES`` and ``MIRROR_STORE_FACTORIES`` (JSONL, SQLite,
PostgreSQL, S3, Redis) and against storages opened as the launcher opens them (``open_store`` with a
data folder and a mirror)."""
from __future__ import annotations

from pathlib import Path

import pytest

from core import LocalSessionStore, SessionKey, SessionManager, header_entry, message_entry
from core.errors import SearchUnavailable
from core.storage import Storage, open_store
from core.stores.blobs import BlobStore
from core.stores.memory_log import MirroredMemoryLog, project_scope
from core.stores.mirror import MirroredSessionStore
from core.stores.sql_store import SqlSessionStore
from tests.conftest import MIRROR_STORE_FACTORIES, STORE_FACTORIES, made_store

PK = "-home-user-proj-0123456789abcdef"
SEARCHABLE = {"jsonl", "sqlite", "postgres"}


@pytest.fixture(params=sorted({**STORE_FACTORIES, **MIRROR_STORE_FACTORIES}))
def kind_and_store(request, tmp_path):
    """``(kind, store)`` for every store kind, the mirror-first ones (S3, Redis) included."""
    for store in made_store({**STORE_FACTORIES, **MIRROR_STORE_FACTORIES}[request.param], tmp_path):
        yield request.param, store


def _session(store, sid="s1", text="the quokka question") -> SessionKey:
    key = SessionKey(PK, sid)
    store.create_whole(key, [header_entry(sid, PK, "/home/user/proj", created_at=1.0),
                             message_entry({"role": "user", "content": text}, ts=2.0)])
    return key


class TestEveryKind:
    """Guards against a store kind whose storage lacks a service (a lease board, a memory log,
    blobs, aliases) or builds one twice (two memory logs, two search indexes of one store)."""

    def test_services_are_built_once_per_storage(self, kind_and_store, anycode_home):
        _, store = kind_and_store
        storage = Storage(store)
        assert storage.sessions is store and storage.local is store and storage.mirror is None
        for name in ("leases", "memory_log", "memories", "aliases", "blobs"):
            assert getattr(storage, name) is getattr(storage, name), f"{name} is built once"
        assert Storage(store).leases is not storage.leases, "each storage holds its own"
        assert storage.data_dir == anycode_home  # the settings' data folder unless given

    def test_leases_memories_blobs_and_aliases_work(self, kind_and_store, tmp_path):
        kind, store = kind_and_store
        storage = Storage(store, data_dir=tmp_path / "data")
        key = _session(store)
        assert storage.leases.acquire(key, "tab-a") and not storage.leases.acquire(key, "tab-b")
        assert storage.leases.current(key).holder == "tab-a"
        storage.leases.release(key, "tab-a")
        memory = storage.memories.add("The build uses make", project_key=PK)
        assert [m.id for m in storage.memories.list(PK)] == [memory.id]
        assert {e["eid"] for e in storage.memory_log.load(project_scope(PK))}
        folder = store.base_dir if kind == "jsonl" else tmp_path / "data"
        assert storage.files_dir == folder
        assert isinstance(storage.blobs, BlobStore) and storage.blobs.root == folder / "blobs"
        name = storage.blobs.put(b"file bytes")
        assert storage.blobs.get(name) == b"file bytes"
        assert storage.aliases.path == folder / "projects.json"
        storage.aliases.record("git:example.org/team/app", PK, "/home/user/proj")
        assert storage.aliases.keys_for("git:example.org/team/app") == {PK: "/home/user/proj"}

    def test_search_where_the_kind_has_one_and_a_sentence_where_not(self, kind_and_store):
        kind, store = kind_and_store
        storage = Storage(store)
        key = _session(store)
        if kind not in SEARCHABLE:
            with pytest.raises(SearchUnavailable) as err:
                storage.search
            assert "\n" not in str(err.value) and "Search is not available" in str(err.value)
            return
        assert storage.search is storage.search
        assert [h.session_id for h in storage.search.search("quokka", project_keys=[PK])] == [key.session_id]

    def test_describe_names_the_store_without_its_password(self, kind_and_store):
        _, store = kind_and_store
        said = Storage(store).describe()
        assert said and "\n" not in said and ":s3cret@" not in said


class TestMirroredStorage:
    """Guards against a mirrored storage whose services are not its local store's (as the lookups
    keyed by store objects answered before the storage held them): leases another process on the
    same data dir sees, the index of the local files, memories copied to the mirror, blobs the mirror
    is given from this machine's folder."""

    @pytest.fixture
    def mirrored(self, tmp_path):
        url = f"sqlite:///{tmp_path / 'mirror.db'}"
        SqlSessionStore(url).close()
        storage = open_store("jsonl", tmp_path / "data", mirror=url)
        yield storage, url
        storage.close()

    def test_the_services_are_the_local_stores(self, mirrored, tmp_path):
        storage, url = mirrored
        assert isinstance(storage.sessions, MirroredSessionStore) and storage.mirror is storage.sessions
        assert isinstance(storage.local, LocalSessionStore) and storage.local.base_dir == tmp_path / "data"
        key = _session(storage.sessions)
        # The lease: where another process on this data dir (its own storage) looks.
        assert storage.leases.acquire(key, "tab-a")
        assert Storage(LocalSessionStore(tmp_path / "data")).leases.current(key).holder == "tab-a"
        # The index of the local files, told of writes through the mirrored store.
        assert [h.session_id for h in storage.search.search("quokka", project_keys=[PK])] == [key.session_id]
        SessionManager(storage.sessions).add_messages(key, [{"role": "user", "content": "a wombat now"}])
        assert [h.session_id for h in storage.search.search("wombat", project_keys=[PK])] == [key.session_id]
        # Blobs and aliases in the local folder; the mirror carries from the same blobs.
        assert storage.blobs.root == tmp_path / "data" / "blobs" and storage.mirror.blobs is storage.blobs
        assert storage.aliases.path == tmp_path / "data" / "projects.json"
        assert storage.describe() == f"jsonl ({tmp_path / 'data'}), mirrored to {url}"

    def test_memories_reach_the_mirror(self, mirrored):
        storage, url = mirrored
        assert isinstance(storage.memory_log, MirroredMemoryLog)
        memory = storage.memories.add("Deploys go through the staging bucket", project_key=PK)
        assert storage.memory_log.flush(15)
        mirror = SqlSessionStore(url)
        try:
            assert [m.id for m in Storage(mirror).memories.list(PK)] == [memory.id]
        finally:
            mirror.close()

    def test_a_storage_is_built_from_the_local_store_and_its_own_mirror(self, tmp_path):
        local = LocalSessionStore(tmp_path / "a")
        mirrored = MirroredSessionStore(local, LocalSessionStore(tmp_path / "copy"), outbox_path=tmp_path / "o.db",
                                        start=False)
        try:
            with pytest.raises(TypeError):
                Storage(mirrored)  # its services are its primary's: say which store that is
            with pytest.raises(ValueError):
                Storage(LocalSessionStore(tmp_path / "b"), mirror=mirrored)
            assert Storage(local, mirror=mirrored).sessions is mirrored
        finally:
            mirrored.close()


class TestWhereFilesLive:
    """Guards against two features keeping one kind of file in two places: with the sessions in
    ``jsonl:FOLDER`` and the data folder elsewhere, the project identity the page records must be
    the one ``--continue`` and the Memory panel read, and the checkpoint blobs stay beside the
    sessions, while the mirror's outbox and agent definitions stay in the data folder."""

    def test_a_jsonl_folder_apart_from_the_data_folder(self, tmp_path):
        from webui.chat import remote
        from webui.chat.context import WebContext

        sessions, data = tmp_path / "sessions", tmp_path / "data"
        project = tmp_path / "work" / "app"
        project.mkdir(parents=True)
        import subprocess

        subprocess.run(["git", "init", "-q", str(project)], check=True)
        subprocess.run(["git", "-C", str(project), "remote", "add", "origin", "git@example.org:team/app.git"],
                       check=True)
        with open_store(f"jsonl:{sessions}", data) as storage:
            assert storage.data_dir == data and storage.files_dir == sessions
            ctx = WebContext(storage=storage, manager=SessionManager(storage.sessions), project_path=str(project))
            identity = ctx.identity()  # the page records where this checkout is
            assert identity
            # Recorded where every reader of aliases looks: another checkout of the same
            # repository (another machine's path) finds this project's key.
            elsewhere = tmp_path / "elsewhere" / "app"
            elsewhere.mkdir(parents=True)
            subprocess.run(["git", "init", "-q", str(elsewhere)], check=True)
            subprocess.run(["git", "-C", str(elsewhere), "remote", "add", "origin", "https://example.org/team/app"],
                           check=True)
            assert remote.alias_keys_of_folder(storage, str(elsewhere)) == [ctx.project_key]
            assert (sessions / "projects.json").is_file() and not (data / "projects.json").exists()
            assert storage.blobs.root == sessions / "blobs"
            assert storage.protected_dirs() == (data, sessions)


def test_close_delivers_what_the_mirror_was_given(tmp_path):
    url = f"sqlite:///{tmp_path / 'mirror.db'}"
    SqlSessionStore(url).close()
    storage = open_store("jsonl", tmp_path / "data", mirror=url)
    key = _session(storage.sessions)
    storage.close()
    mirror = SqlSessionStore(url)
    try:
        assert mirror.load(key) == LocalSessionStore(Path(tmp_path / "data")).load(key)
    finally:
        mirror.close()
