"""The ``anycode`` command line, on top of the web UI's layers: the launcher (:mod:`webui.cli.launcher`)
and the terminal commands (``sessions``, ``memory``, ``import``, ``backup``, ``restore``)."""
