"""Layer ``gui``: the Gradio page — ``build_*`` functions make components, ``wire_*`` bind events to the
functions of :mod:`webui.chat`. The only layer that imports gradio."""
