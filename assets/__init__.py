"""Static files of the anycode web UI (CSS, icons, the README screenshot), read through
``importlib.resources`` so the app finds them wherever it is installed."""
