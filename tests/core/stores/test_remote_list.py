"""The mirror-only listing's refresh cadence (core/stores/remote_list.py): a page just opened asks
for a fresher listing than the scheduled one (the fresh-user trial's D4)."""
from __future__ import annotations

import time

from core import LocalSessionStore
from core.stores.remote_list import RemoteListing


def test_a_listing_is_refreshed_only_when_older_than_asked(tmp_path):
    """``max_age`` asks for a fresher listing than the ttl; none is started while one is fresh."""
    calls = []
    mirror = LocalSessionStore(tmp_path / "mirror")

    def remote_store():
        calls.append(1)
        return mirror

    found = RemoteListing(remote_store, LocalSessionStore(tmp_path / "local"), ttl=30.0)
    found.refresh(["p"])
    found.view(["p"], max_age=5.0)
    found.view(["p"])
    assert len(calls) == 1, "a listing a moment old is reused"
    found._views[found._ask(["p"], None)].checked_at -= 6.0
    found.view(["p"])
    assert len(calls) == 1, "still within the ttl"
    found.view(["p"], max_age=5.0)
    deadline = time.monotonic() + 5
    while len(calls) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(calls) == 2, "older than max_age: refreshed in the background"
