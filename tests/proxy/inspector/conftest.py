"""Inspector fixtures (defined in inspect_fixtures.py, re-exported here for pytest)."""

from tests.proxy.inspector.inspect_fixtures import make_ui_server, populated

__all__ = ["make_ui_server", "populated"]
