"""Layer ``render``: the view model turned into what the page shows — chat rows and the sidebar's HTML.
No store, no Gradio; imports ``text`` and ``i18n`` only."""
