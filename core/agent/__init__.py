"""The model side: client config, the agent loop, workspace tools, request repair, prompts, the
runner that persists rounds into a session, and titles.

Imports :mod:`core.session` and :mod:`core.stores`; imported by nothing in them. The modules here
import openai, so ``import core`` loads them lazily (see :data:`core._LAZY`).
"""
