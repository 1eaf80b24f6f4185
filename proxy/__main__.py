"""`python -m proxy` is the `ctxproxy` command."""

from proxy.cli import main

raise SystemExit(main())
