"""`python -m proxy` is the `ctxproxy` command."""

from proxy.cli.main import main

raise SystemExit(main())
