"""The page's work per action (issue 32): no chat is a progress target (:mod:`webui.gui.progress`);
the page load is one event for the sidebar foot too."""
from __future__ import annotations

from tests.support.chat_ctx import page_config as _config


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
            if dep["show_progress"] != "hidden":
                assert set(targets) == set(dep["outputs"]) - chats  # the others keep their progress

    def test_the_relabelling_load_shows_progress_on_one_component(self, tmp_path):
        """Guards against the ~45 labels the page load may relabel becoming progress targets: each
        target's data was copied on every status change of every event for the page's life."""
        cfg = _config(tmp_path)
        ids = {c["props"].get("elem_id"): c["id"] for c in cfg["components"]}
        loads = [d for d in cfg["dependencies"] if d["backend_fn"] and any(t[1] == "load" for t in d["targets"])]
        relabel = max(loads, key=lambda d: len(d["outputs"]))
        assert len(relabel["outputs"]) > 30 and relabel["show_progress"] == "hidden"
        assert relabel["show_progress_on"] == [ids["ac-lang"]]

    def test_an_event_whose_progress_is_hidden_shows_it_on_one_small_component(self, tmp_path):
        """Guards against the outputs of events that draw no progress (the state hub, the live
        check, a send's stream, the title push ...) becoming progress targets: the page copied
        each of them, and every block inside them, at every status change of every event — and
        against them having none, which left some of their updates undrawn (round 13)."""
        cfg = _config(tmp_path)
        ids = {c["props"].get("elem_id"): c["id"] for c in cfg["components"]}
        hidden = [d for d in cfg["dependencies"]
                  if d["backend_fn"] and d["show_progress"] == "hidden" and d["outputs"]]
        assert len(hidden) > 30
        for dep in hidden:
            assert dep["show_progress_on"] == [ids["ac-lang"]], dep["id"]

    def test_an_event_that_fills_the_open_chat_draws_no_progress(self, tmp_path):
        """Guards against "processing | 0.2s" drawn over the sidebar list, the title, the top
        bar and the message box (and taking their clicks) while a chat opens, a version switches
        or a title is renamed (fresh-user trial 16: over the list while a click waited for the
        page's load)."""
        cfg = _config(tmp_path)
        ids = {c["props"].get("elem_id"): c["id"] for c in cfg["components"]}
        filling = [d for d in cfg["dependencies"] if d["backend_fn"] and ids["ac-chat"] in d["outputs"]]
        assert len(filling) > 10
        for dep in filling:
            assert dep["show_progress"] == "hidden" and dep["show_progress_on"] == [ids["ac-lang"]], dep["id"]

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

    def test_one_event_follows_the_tab_state(self, tmp_path):
        """Guards against more than one event per change of the tab's state: each is a round trip
        after every open, switch and send, and its status changes make the page copy every
        progress target's data (the title push ran on every change; it now runs only when the
        state hub finds a title awaited)."""
        cfg = _config(tmp_path)
        states = {c["id"] for c in cfg["components"] if c["type"] == "state"}
        on_state = [d for d in cfg["dependencies"] if any(t[1] == "change" and t[0] in states for t in d["targets"])]
        assert len(on_state) == 1, [d["id"] for d in on_state]
        ids = {c["props"].get("elem_id"): c["id"] for c in cfg["components"]}
        push = [d for d in cfg["dependencies"] if [ids["ac-title-due"], "change"] in [list(t) for t in d["targets"]]]
        assert len(push) == 1 and ids["ac-title"] in push[0]["outputs"]

    def test_the_page_scripts_run_from_one_load_event(self, tmp_path):
        """Guards against a load event per page script: eight of them (drawer, shortcuts, drafts,
        top-bar menu, toasts, live check, chat text, earlier messages) made every component of the
        page look through eight more events while it mounted (issue 32)."""
        from webui.gui import live, narrow, notice_place, shortcuts, topbar_menu
        from webui.gui.app import CHAT_TEXT_JS, DRAFTS_JS, EARLIER_ON_SCROLL_JS

        cfg = _config(tmp_path)
        js_loads = [d for d in cfg["dependencies"] if not d["backend_fn"] and any(t[1] == "load" for t in d["targets"])]
        assert len(js_loads) == 1
        for js in (narrow.NARROW_JS, live.LIVE_JS, shortcuts.KEYS_JS, topbar_menu.TOPBAR_MENU_JS,
                   notice_place.PLACE_TOASTS_JS, CHAT_TEXT_JS, DRAFTS_JS, EARLIER_ON_SCROLL_JS):
            assert js.strip() in js_loads[0]["js"]
