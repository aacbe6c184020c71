"""Self-tests of the harness: CPU only, fast. ``pytester`` drives throw-away catalogues end to end."""

pytest_plugins = ["pytester"]
