"""The mirror-only listing (core/stores/remote_list.py) and expert agents' sessions (issue 30)."""
from __future__ import annotations

from core import LocalSessionStore, SessionManager
from core.agent.definitions import AgentDefinition
from core.agent.experts import Consultation
from core.stores.remote_list import RemoteListing
from tests.support.storage import storage_of


class TestRemoteListingLeavesExpertsOut:
    """Guards against another machine's expert session listed in the sidebar as a chat "from
    another machine" (it is pulled with the project, never a chat)."""

    def test_only_the_chat_is_listed(self, tmp_path):
        project = tmp_path / "shop"
        project.mkdir()
        mirror, local = LocalSessionStore(tmp_path / "mirror"), LocalSessionStore(tmp_path / "local")
        chat = SessionManager(mirror).create(project, title="Checkout bug")
        SessionManager(mirror).add_messages(chat.key, [{"role": "user", "content": "why?"}])
        arch = AgentDefinition("architect", "d", "You are the architect.", mode="expert")
        with Consultation.open(storage_of(mirror), chat.project_key, arch, str(project), "sys") as c:
            c.ask("where?")
        view = RemoteListing(lambda: mirror, local).refresh([chat.project_key])
        assert view.state == "ok" and [m.id for m in view.rows] == [chat.id]
