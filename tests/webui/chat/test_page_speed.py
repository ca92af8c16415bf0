"""The page's work per action (issue 32): no chat is a progress target (:mod:`webui.gui.progress`);
the page load is one event for the sidebar foot too."""
from __future__ import annotations

import json





def _config(tmp_path):
    import json

    from core.stores.jsonl_store import LocalSessionStore
    from tests.support.chat_ctx import make_ctx
    from webui.gui.app import build_app

    (tmp_path / "proj").mkdir()
    ctx = make_ctx(LocalSessionStore(tmp_path / "data"), tmp_path / "proj")
    return json.loads(json.dumps(build_app(ctx).get_config_file(), default=str))


class TestPageEvents:
    """Guards the browser's work per event: a chat among an event's progress targets made the page
    copy its 200 messages on every status change of every event (the once-a-second live check
    included), and the sidebar foot's two load events were two more round trips per page load."""

    def test_no_chat_is_a_progress_target(self, tmp_path):
        cfg = _config(tmp_path)
        chats = {c["id"] for c in cfg["components"] if c["type"] == "chatbot"}
        filling = [d for d in cfg["dependencies"] if chats & set(d["outputs"])]
        assert len(filling) > 10  # opening, sending, versions, rewind ... all fill the chat
        for dep in filling:
            targets = dep["show_progress_on"]
            assert targets is not None and not chats & set(targets), dep["id"]
            if dep["show_progress"] == "hidden" and any(t[1] == "load" for t in dep["targets"]):
                assert targets == [], dep["id"]  # nothing drawn: no status pushed either
            else:
                assert set(targets) == set(dep["outputs"]) - chats  # the others keep their progress

    def test_the_page_load_events_have_no_progress_target(self, tmp_path):
        # Each target's status is pushed again on every status change of every event, drawn or
        # not: ~250 ms of the page load's main thread went to the load events' 60-odd outputs.
        cfg = _config(tmp_path)
        loads = [d for d in cfg["dependencies"] if d["backend_fn"] and any(t[1] == "load" for t in d["targets"])]
        assert len(loads) >= 2 and all(d["show_progress"] == "hidden" for d in loads)  # the view, the labels
        assert all(d["show_progress_on"] == [] for d in loads)

    def test_the_live_check_does_not_fill_the_chat(self, tmp_path):
        cfg = _config(tmp_path)
        ids = {c["props"].get("elem_id"): c["id"] for c in cfg["components"]}
        check = [d for d in cfg["dependencies"] if [ids["ac-live-check"], "click"] in [list(t) for t in d["targets"]]]
        assert len(check) == 1 and ids["ac-chat"] not in check[0]["outputs"]

    def test_the_sidebar_foot_comes_with_the_page_load(self, tmp_path):
        cfg = _config(tmp_path)
        ids = {c["props"].get("elem_id"): c["id"] for c in cfg["components"]}
        loads = [d for d in cfg["dependencies"] if d["backend_fn"] and any(t[1] == "load" for t in d["targets"])]
        with_foot = [d for d in loads if {ids["ac-lang"], ids["ac-prefs"]} <= set(d["outputs"])]
        assert len(with_foot) == 1 and ids["ac-list"] in with_foot[0]["outputs"]
        assert [d for d in loads if ids["ac-prefs"] in d["outputs"]] == with_foot  # no load event of its own


def _served_config(url: str, cookies: str = "anycode_nav=en-US; anycode_tz=UTC") -> tuple[str, dict]:
    import re
    import urllib.request

    req = urllib.request.Request(url, headers={"Cookie": cookies, "Accept-Language": "en-US"})
    page = urllib.request.urlopen(req, timeout=30).read().decode()
    found = re.search(r"window\.gradio_config = (.*?);</script>", page, re.S)
    assert found, "the page carries no config"
    return page, json.loads(found.group(1))


class TestFirstViewInThePage:
    """Guards the page coming with empty components that its load event fills one round trip
    later (issue 32): the sidebar list, the chat named by ``?session=`` and its title must be in
    the HTML it is served with — and a title written by someone else must stay text there, not
    close the page's script (the config is embedded in a ``<script>``)."""

    def test_list_chat_and_title_are_in_the_served_page(self, tmp_path):
        from core.session.entries import header_entry, message_entry, title_entry
        from core.session.keys import SessionKey, new_session_id, project_key
        from core.stores.jsonl_store import LocalSessionStore
        from tests.support.web_server import launch

        proj = tmp_path / "project"
        proj.mkdir()
        store = LocalSessionStore(tmp_path / "data")
        hostile = '</script><script>alert(1)</script> & "quotes"'
        ids = []
        for title, said in ((hostile, "what does this title do?"), ("Plan the garden", "tomatoes or beans?")):
            key = SessionKey(project_key(str(proj)), new_session_id())
            store.append(key, [header_entry(key.session_id, key.project_key, str(proj)),
                               message_entry({"role": "user", "content": said}),
                               message_entry({"role": "assistant", "content": "Let us see."}),
                               title_entry(title, "user")])
            ids.append(key.session_id)
        app = launch(tmp_path).wait_ready()
        try:
            page, cfg = _served_config(f"{app.url}?session={ids[1]}")
            by_elem = {c["props"].get("elem_id"): c["props"] for c in cfg["components"]}
            assert "Plan the garden" in by_elem["ac-list"]["value"]
            assert "&lt;/script&gt;" in by_elem["ac-list"]["value"]  # listed as text
            assert "</script><script>alert(1)" not in page  # the page's script is not closed by it
            assert by_elem["ac-title"]["value"] == "Plan the garden"
            chat = json.dumps(by_elem["ac-chat"]["value"])
            assert "tomatoes or beans?" in chat and "Let us see." in chat
            first_key = by_elem["ac-first-view"]["value"]
            _page, again = _served_config(f"{app.url}?session={ids[0]}")
            props = {c["props"].get("elem_id"): c["props"] for c in again["components"]}
            assert props["ac-title"]["value"] == hostile  # the field holds the title as written
            assert props["ac-first-view"]["value"] not in ("", first_key)  # a key per page load
            # a first visit: the browser's zone is not known yet (the date groups depend on it),
            # so its load event draws the list
            _page, first = _served_config(app.url, cookies="")
            props = {c["props"].get("elem_id"): c["props"] for c in first["components"]}
            assert not props["ac-list"].get("value") and not props["ac-first-view"].get("value")
        finally:
            app.stop()


class TestFirstViewKeys:
    """Guards a page's baked view being handed to another page load, or twice."""

    def test_a_key_is_taken_once_and_expires(self):
        from webui.gui.first_view import FirstView, FirstViews

        views = FirstViews(seconds=0.2)
        one, two = views.put(FirstView(("a",))), views.put(FirstView(("b",)))
        assert views.take(one).outputs == ("a",)
        assert views.take(one) is None  # once
        assert views.take("") is None and views.take(None) is None
        import time

        time.sleep(0.3)
        assert views.take(two) is None  # expired

    def test_the_oldest_unloaded_pages_go_first(self):
        from webui.gui.first_view import FirstView, FirstViews

        views = FirstViews(kept=2)
        keys = [views.put(FirstView((i,))) for i in range(3)]
        assert views.take(keys[0]) is None
        assert [views.take(k).outputs for k in keys[1:]] == [(1,), (2,)]
