"""The browser tests' fixtures (a real Chromium, the app and the fake OpenAI server as subprocesses):
``world``, ``page`` (per test) and ``browser`` (one Chromium per module), from
``tests/support/chromium.py``. A module that needs another set-up defines its own fixture of the same
name (``world`` with a module-scoped app, ``page`` from the module's ``browser``)."""
from tests.support.chromium import browser, page, world  # noqa: F401  (fixtures)
