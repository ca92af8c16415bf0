"""``python -m webui``: the same as the ``anycode`` command."""
from webui.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
