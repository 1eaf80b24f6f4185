"""The agent CLI suite runs only when asked (`make test-agents` sets CTXPROXY_AGENTS=1), not in `pytest`."""

from __future__ import annotations

import os

collect_ignore_glob = [] if os.environ.get("CTXPROXY_AGENTS") == "1" else ["test_*.py"]
