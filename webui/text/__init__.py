"""Layer ``text``: how text is shown — Markdown/HTML safety of chat text, remote media as links, relative
times and date groups, the user's sentence of an error. Pure functions; imports only :mod:`webui.i18n`."""
