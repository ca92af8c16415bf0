"""anycode's web UI: a ChatGPT-like Gradio app over stored sessions, and the ``anycode`` launcher.

``webui.cli`` parses the command line, ``webui.app`` builds the Gradio Blocks, ``webui.handlers``
holds the plain functions the UI calls (tested without a browser). Importing this package does not
import Gradio, so the launcher can set the offline environment first.
"""
