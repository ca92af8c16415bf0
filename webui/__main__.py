"""``python -m webui``: the same as the ``anycode`` command."""
from webui.cli.launcher import main

if __name__ == "__main__":
    raise SystemExit(main())
