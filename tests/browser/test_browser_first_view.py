"""The page is served with its first view in it (issue 32, :mod:`webui.gui.first_view`): the
sidebar list, the chat named by ``?session=`` and its title are on screen before any of the page's
events is answered, and the tab then works as one whose load event drew them."""
from __future__ import annotations

import json

import pytest

from core.session.keys import project_key
from core.stores.jsonl_store import LocalSessionStore
from tests.support.chromium import TIMEOUT_MS, _post, _seed, expect, send

pytestmark = pytest.mark.browser


def _session_titled(world, title: str) -> str:
    store = LocalSessionStore(world["data"])
    return next(m.id for m in store.list(project_key(str(world["proj"]))) if m.title == title)


class TestFirstViewWithoutARoundTrip:
    """Guards the page showing an empty sidebar and chat until its load event's answer came back
    (a round trip and a render after the page itself, 0.4–0.9 s on the 2-core machine), and a
    baked view that leaves the tab half set up (its state, its notice) once the load is answered."""

    def test_list_chat_and_title_are_there_before_any_event_is_answered(self, world, page):
        _seed(world["data"], world["proj"])
        url = world["start_app"]()
        page.goto(url)  # a first visit: the page learns the browser's language and zone
        expect(page.locator("#ac-list .ac-session").first).to_be_visible()
        sid = _session_titled(world, "Why is CI flaky on Mondays?")
        held = []
        page.route("**/gradio_api/queue/join*", lambda route: held.append(route))
        page.goto(f"{url}?session={sid}")
        expect(page.locator("#ac-list .ac-session", has_text="Set up the Postgres store")).to_be_visible()
        expect(page.locator("[data-testid=user]", has_text="Why is CI flaky on Mondays?")).to_be_visible()
        expect(page.locator("#ac-title input")).to_have_value("Why is CI flaky on Mondays?")
        page.wait_for_timeout(300)
        assert held, "the page sent no load event"
        for route in held:
            route.continue_()
        page.unroute("**/gradio_api/queue/join*")
        # The tab is set up as by its load: a message goes to this chat and is answered there.
        _post(world["fake"] + "/_script", {"replies": [{"text": "Mondays have the cold caches."}]})
        send(page, "and why Mondays?")
        expect(page.locator("[data-testid=bot]", has_text="Mondays have the cold caches.")).to_be_visible(
            timeout=TIMEOUT_MS)
        assert f"session={sid}" in page.url
        lines = [json.loads(x) for x in next((world["data"] / "projects").glob(f"*/{sid}.jsonl")).read_text().splitlines()]
        said = [e["message"]["content"] for e in lines if e.get("type") == "message" and e["message"]["role"] == "user"]
        assert said[-1] == "and why Mondays?"

    def test_a_reloaded_page_still_says_why_the_chat_could_not_open(self, world, page):
        url = world["start_app"]()
        page.goto(url)
        expect(page.locator("#ac-input textarea")).to_be_visible()
        page.goto(f"{url}?session=0123456789abcdef")  # the cookies are known now: a baked page
        expect(page.locator(".toast-body", has_text="No session")).to_be_visible(timeout=TIMEOUT_MS)
        expect(page.locator("[data-testid=bot]")).to_have_count(0)
