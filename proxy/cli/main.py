"""The `ctxproxy` command (also `python -m proxy`): serve, check-config, and plug-in subcommands.

Other subcommands live in their own modules and are registered by adding their module name to
SUBCOMMAND_MODULES; each module exposes `add_parser(subparsers) -> ArgumentParser` and sets
`func(args) -> int` on its parser (see proxy/cli/inspect.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from config.errors import ConfigError
from config.loader import ENV_CONFIG, load_settings
from config.settings import Settings

EXIT_CONFIG_ERROR = 2

# One line per plug-in subcommand module (search/expand, inspect, replay, ...).
SUBCOMMAND_MODULES: list[str] = [
    "proxy.cli.inspect",
    "proxy.cli.replay",
    "proxy.cli.recall",
    "proxy.cli.lifecycle",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ctxproxy",
        description="OpenAI-compatible reverse proxy that compacts long conversations losslessly.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_serve(sub)
    _add_check_config(sub)
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(name).add_parser(sub)
    return parser


def _add_serve(sub: Any) -> None:
    help_text = ("run the proxy: POST /v1/chat/completions, /v1/responses and /v1/messages (compacted), "
                 "every other /v1/ path forwarded unchanged, /healthz, /readyz, /metrics, "
                 "POST /v1/context/search, /v1/context/expand, DELETE /v1/context/conversations/{id}, "
                 "/v1/context/tenant, and /ui when server.admin_key is set")
    p = sub.add_parser("serve", help=help_text, description=help_text)
    p.add_argument("--config", metavar="FILE",
                   help=f"YAML config (default: ${ENV_CONFIG}, else built-in defaults)")
    p.add_argument("--host", help="listen address (default: server.host, 127.0.0.1)")
    p.add_argument("--port", type=int, help="listen port (default: server.port, 8080)")
    p.add_argument("--workers", type=_positive, default=1, metavar="N",
                   help="serving processes sharing the port (SO_REUSEPORT) and the store (default 1)")
    p.add_argument("--reuse-port", action="store_true", help=argparse.SUPPRESS)  # set for workers
    p.set_defaults(func=run_serve)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _add_check_config(sub: Any) -> None:
    help_text = "validate a config file and print its models (exit 0), or the error (exit 2)"
    p = sub.add_parser("check-config", help=help_text, description=help_text)
    p.add_argument("config", metavar="FILE", help="YAML config to check")
    p.set_defaults(func=run_check_config)


def run_serve(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> int:
    try:
        settings = load_settings(args.config, os.environ if env is None else env)
    except ConfigError as exc:
        print(f"ctxproxy: config error: {exc.message}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    server = dataclasses.replace(settings.server, host=args.host or settings.server.host,
                                 port=args.port if args.port is not None else settings.server.port)
    settings = dataclasses.replace(settings, server=server)
    if getattr(args, "workers", 1) > 1:
        return _serve_workers(args, server.host, server.port)
    from proxy.app import create_app
    from proxy.server.protocol import serve

    print(f"ctxproxy listening on http://{server.host}:{server.port} "
          f"({len(settings.model_list)} model entries, store {_store_name(settings)})", file=sys.stderr)
    serve(create_app(settings), server.host, server.port, reuse_port=getattr(args, "reuse_port", False))
    return 0


def _store_name(settings: Settings) -> str:
    """Where the store is, never with credentials: the SQLite path, or PostgreSQL's host/database."""
    url = settings.store.url
    return settings.store.path if not url else "postgresql://" + url.split("://", 1)[1].rsplit("@", 1)[-1]


def _serve_workers(args: argparse.Namespace, host: str, port: int) -> int:
    """The master of `--workers N` (proxy/cli/workers.py); the port must be fixed to be shared."""
    if port == 0:
        print("ctxproxy: --workers needs a fixed --port (port 0 would give each worker its own)",
              file=sys.stderr)
        return EXIT_CONFIG_ERROR
    from proxy.cli.workers import run_workers

    argv = [*(["--config", args.config] if args.config else []), "--host", host, "--port", str(port)]
    return run_workers(argv, args.workers)


def run_check_config(args: argparse.Namespace, env: Mapping[str, str] | None = None,
                     out: TextIO | None = None) -> int:
    try:
        settings = load_settings(args.config, os.environ if env is None else env)
    except ConfigError as exc:
        print(f"config error: {exc.message}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    print(summary(settings, args.config), file=out or sys.stdout)
    return 0


def summary(settings: Settings, path: str | None) -> str:
    """Human summary of a loaded config; never prints key values."""
    lines = [f"config OK: {path or 'built-in defaults'}", f"models ({len(settings.model_list)}):"]
    for m in settings.model_list:
        p = m.litellm_params
        key = "configured key" if p.api_key else "client's key"
        window = f", context_window {m.context_window}" if m.context_window else ""
        lines.append(f"  {m.model_name} -> {p.model} @ {p.api_base or 'provider default'} "
                     f"({key}{window})")
    s = settings.summarizer
    lines.append(f"summarizer: {s.model or 'the request model'}")
    lines.append(f"store: {_store_name(settings)}")
    lines.append(f"server: {settings.server.host}:{settings.server.port}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    result = args.func(args)
    return int(result or 0)


if __name__ == "__main__":
    raise SystemExit(main())
