"""anycode's web UI: a ChatGPT-like Gradio app over stored sessions, and the ``anycode`` launcher.

``webui.cli.launcher`` parses the command line, ``webui.gui.app`` builds the Gradio Blocks, ``webui.chat.handlers``
holds the plain functions the UI calls (tested without a browser). Importing this package does not
import Gradio, so the launcher can set the offline environment first.
"""
