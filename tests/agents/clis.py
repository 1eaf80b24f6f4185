"""The four agent CLIs: where they are installed, how each runs headless against ctxproxy, its scripted loop.

Every loop works on scratch files `notes_<k>.txt` in a fresh folder: for each file in turn it reads the
file, lists the folder, runs a shell command on it and edits one line of it, in the CLI's own tools, then
answers FINAL_TEXT. The windows are a little above each CLI's fixed prompt (system prompt and tool
schemas), so ctxproxy starts compacting about halfway through the loop.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.agents.provider import Action, Call, Final, Script
from tests.e2e.server_process import ROOT

JSON = dict[str, Any]
AGENTS_DIR = ROOT / ".agents"
NPM_BIN = AGENTS_DIR / "npm" / "node_modules" / ".bin"
STEPS = 44  # tool steps before the final answer
FILES = 11
LINES = 80
FINAL_TEXT = "All scratch files are read, listed, checked and edited."
EDITED_LINE = 3
TASK = "Go through the scratch notes files one by one."
NOTE_TOOLS = ("Agent", "Skill", "TaskCreate", "TaskUpdate", "TaskList", "TaskGet", "TaskOutput", "TaskStop")


def scratch_line(k: int, j: int) -> str:
    """Line `j` of scratch file `k` (unique in the whole folder)."""
    return (f"line {j} of notes {k}: the ledger entry {k * 1000 + j} records a shipment of {j * 7 % 97} "
            f"crates to depot {chr(65 + j % 26)}{k}")


def edited_line(k: int) -> str:
    """What the scripted edit turns line EDITED_LINE of file `k` into."""
    return scratch_line(k, EDITED_LINE).replace(f"notes {k}:", f"notes {k} (edited):")


def write_scratch(work: Path) -> None:
    """Create the scratch folder and its files."""
    work.mkdir(parents=True, exist_ok=True)
    for k in range(FILES):
        lines = [scratch_line(k, j) for j in range(1, LINES + 1)]
        (work / f"notes_{k}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


def step_plan(step: int) -> tuple[str, int]:
    """The operation ("read", "list", "shell", "edit") and scratch file of one step."""
    return ("read", "list", "shell", "edit")[step % 4], step // 4 % FILES


def edits_done(work: Path) -> int:
    """How many scratch files carry the scripted edit."""
    return sum(edited_line(k) in (work / f"notes_{k}.txt").read_text(encoding="utf-8") for k in range(FILES))


def skip_reason(name: str) -> str | None:
    """Why a CLI cannot run here (install.sh's note, or not installed), None when it can."""
    note = AGENTS_DIR / f"{name}.skip"
    if note.exists():
        return note.read_text(encoding="utf-8").strip()
    if not (AGENTS_DIR / f"{name}.installed").exists():
        return "not installed (run tests/agents/install.sh, or `make test-agents`)"
    return None


def _script(actions: list[Action]) -> Script:
    """A Script that plays `actions` in order, then FINAL_TEXT for every later loop request."""
    def play(step: int, body: JSON) -> Action:
        """The step's scripted action."""
        return actions[step] if step < len(actions) else Final(FINAL_TEXT)
    return play


@dataclass
class ClaudeCode:
    """Claude Code (`claude -p`) on the Anthropic Messages route."""

    name: str = "claude"
    protocol: str = "anthropic"
    model: str = "claude-e2e"
    side_model: str = "claude-e2e-small"
    window: int = 30_000
    steps: int = STEPS
    system_notes: bool = False  # NOTE_TOOLS on: their notes come as `system` messages in `messages`

    def script(self, work: Path) -> Script:
        """Read, Bash ls, Bash grep, Edit on each file."""
        write_scratch(work)
        return _script([self._action(work, *step_plan(i)) for i in range(self.steps)])

    def _action(self, work: Path, op: str, k: int) -> Action:
        """One step's tool call on scratch file `k`."""
        path = str(work / f"notes_{k}.txt")
        if op == "read":
            return Call("Read", {"file_path": path})
        if op == "list":
            return Call("Bash", {"command": f"ls -la {work}", "description": "List the scratch files"})
        if op == "shell":
            return Call("Bash", {"command": f"grep -c ledger {path}", "description": "Count ledger lines"})
        return Call("Edit", {"file_path": path, "old_string": scratch_line(k, EDITED_LINE),
                             "new_string": edited_line(k), "replace_all": False})

    def is_main(self, body: JSON) -> bool:
        """The loop's requests carry Claude Code's tools."""
        return any(t.get("name") == "Bash" for t in body.get("tools") or [])

    def command(self, work: Path, home: Path, base_url: str) -> tuple[list[str], dict[str, str]]:
        """`claude -p` in bypass-permissions mode; no telemetry, updates or other traffic."""
        env = {"ANTHROPIC_BASE_URL": base_url, "ANTHROPIC_API_KEY": "sk-ant-" + "e2e0123456789abcdef",
               "ANTHROPIC_MODEL": self.model, "ANTHROPIC_SMALL_FAST_MODEL": self.side_model,
               "ANTHROPIC_DEFAULT_HAIKU_MODEL": self.side_model, "CLAUDE_CODE_MAX_OUTPUT_TOKENS": "4096",
               "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
               "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1", "DISABLE_BUG_COMMAND": "1",
               "DISABLE_AUTO_COMPACT": "1", "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1", "IS_SANDBOX": "1"}
        argv = [str(NPM_BIN / "claude"), "-p", TASK,
                "--dangerously-skip-permissions", "--model", self.model]
        return argv + ([] if self.system_notes else ["--disallowedTools", *NOTE_TOOLS]), env

    def stdin(self, work: Path) -> bytes:
        """Nothing: the task is on the command line."""
        return b""


@dataclass
class Codex:
    """Codex CLI (`codex exec`) with a custom provider on the Responses route."""

    name: str = "codex"
    protocol: str = "responses"
    model: str = "gpt-e2e"
    side_model: str = "gpt-e2e-small"
    window: int = 26_000

    def script(self, work: Path) -> Script:
        """cat, ls, grep and sed -i through exec_command on each file."""
        write_scratch(work)
        return _script([self._action(*step_plan(i)) for i in range(STEPS)])

    def _action(self, op: str, k: int) -> Action:
        """One step's exec_command on scratch file `k`."""
        name = f"notes_{k}.txt"
        command = {"read": f"cat {name}", "list": "ls -la", "shell": f"grep -c ledger {name}",
                   "edit": f"sed -i 's/^line {EDITED_LINE} of notes {k}:/line {EDITED_LINE} of notes {k}"
                           f" (edited):/' {name}"}[op]
        return Call("exec_command", {"cmd": command})

    def is_main(self, body: JSON) -> bool:
        """The loop's requests carry Codex's exec_command tool."""
        return any(t.get("name") == "exec_command" for t in body.get("tools") or [])

    def command(self, work: Path, home: Path, base_url: str) -> tuple[list[str], dict[str, str]]:
        """`codex exec` with CODEX_HOME's config.toml naming the provider; no sandbox, no approvals."""
        codex_home = home / ".codex"
        codex_home.mkdir(parents=True, exist_ok=True)
        (codex_home / "config.toml").write_text(f"""model = "{self.model}"
model_provider = "ctxproxy"
check_for_update_on_startup = false

[analytics]
enabled = false

[features]
plugins = false
remote_plugin = false
plugin_sharing = false
apps = false
in_app_updates = false
tool_suggest = false
skill_mcp_dependency_install = false

[model_providers.ctxproxy]
name = "ctxproxy"
base_url = "{base_url}/v1"
wire_api = "responses"
env_key = "CTXPROXY_E2E_KEY"
request_max_retries = 0
stream_max_retries = 0
""", encoding="utf-8")
        env = {"CODEX_HOME": str(codex_home), "CTXPROXY_E2E_KEY": "sk-e2e-0123456789abcdef"}
        argv = [str(NPM_BIN / "codex"), "exec", "--skip-git-repo-check",
                "--dangerously-bypass-approvals-and-sandbox", TASK]
        return argv, env

    def stdin(self, work: Path) -> bytes:
        """Nothing: the task is on the command line."""
        return b""


@dataclass
class OpenCode:
    """opencode (`opencode run`) with an OpenAI-compatible provider on the chat route."""

    name: str = "opencode"
    protocol: str = "chat"
    model: str = "gpt-e2e"
    side_model: str = "gpt-e2e-small"
    window: int = 22_000

    def script(self, work: Path) -> Script:
        """read, glob, bash grep and apply_patch on each file."""
        write_scratch(work)
        return _script([self._action(work, *step_plan(i)) for i in range(STEPS)])

    def _action(self, work: Path, op: str, k: int) -> Action:
        """One step's tool call on scratch file `k`."""
        path = str(work / f"notes_{k}.txt")
        if op == "read":
            return Call("read", {"filePath": path})
        if op == "list":
            return Call("glob", {"pattern": "*.txt"})
        if op == "shell":
            return Call("bash", {"command": f"grep -c ledger {path}", "description": "Count ledger lines"})
        patch = (f"*** Begin Patch\n*** Update File: {path}\n@@\n-{scratch_line(k, EDITED_LINE)}\n"
                 f"+{edited_line(k)}\n*** End Patch")
        return Call("apply_patch", {"patchText": patch})

    def is_main(self, body: JSON) -> bool:
        """The loop's requests carry opencode's bash tool."""
        return any((t.get("function") or {}).get("name") == "bash" for t in body.get("tools") or [])

    def command(self, work: Path, home: Path, base_url: str) -> tuple[list[str], dict[str, str]]:
        """`opencode run`, its config in OPENCODE_CONFIG_CONTENT; no model catalogue, plugins or updates.

        Its plugin package install (npm) is pointed at a closed loopback port; ripgrep comes from PATH.
        """
        models = {self.model: {"name": self.model, "limit": {"context": 200_000, "output": 4096}},
                  self.side_model: {"name": self.side_model, "limit": {"context": 200_000, "output": 1024}}}
        config = {"$schema": "https://opencode.ai/config.json", "autoupdate": False, "share": "disabled",
                  "model": f"ctxproxy/{self.model}", "small_model": f"ctxproxy/{self.side_model}",
                  "provider": {"ctxproxy": {"npm": "@ai-sdk/openai-compatible", "name": "ctxproxy",
                                            "options": {"baseURL": base_url + "/v1",
                                                        "apiKey": "sk-e2e-0123456789abcdef"},
                                            "models": models}}}
        (home / ".npmrc").write_text("registry=http://127.0.0.1:9/\n", encoding="utf-8")
        env = {"OPENCODE_CONFIG_CONTENT": json.dumps(config), "OPENCODE_PERMISSION": '{"*":"allow"}',
               "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1",
               "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
               "OPENCODE_DISABLE_SHARE": "1", "OPENCODE_DISABLE_CLAUDE_CODE": "1",
               "OPENCODE_DISABLE_AUTOCOMPACT": "1", "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1",
               "OPENCODE_DISABLE_PROJECT_CONFIG": "1"}
        return [str(NPM_BIN / "opencode"), "run", TASK], env

    def stdin(self, work: Path) -> bytes:
        """Nothing: the task is on the command line."""
        return b""


@dataclass
class Aider:
    """aider (its own venv) on the chat route: user turns piped on stdin, edits as SEARCH/REPLACE blocks."""

    name: str = "aider"
    protocol: str = "chat"
    model: str = "gpt-e2e"
    side_model: str = "gpt-e2e-small"
    window: int = 6_600

    def script(self, work: Path) -> Script:
        """Answer each piped turn by what it asks: a note, an edit block, or FINAL_TEXT."""
        write_scratch(work)

        def answer(step: int, body: JSON) -> Action:
            """The reply to the turn the request ends with."""
            asked = _last_user_text(body)
            for k in range(FILES):
                if f"Mark line {EDITED_LINE} of notes_{k}.txt" in asked:
                    return Final(f"notes_{k}.txt\n```\n<<<<<<< SEARCH\n{scratch_line(k, EDITED_LINE)}\n"
                                 f"=======\n{edited_line(k)}\n>>>>>>> REPLACE\n```\n")
            return Final(FINAL_TEXT if "Are we done" in asked else "Noted, next please.")
        return answer

    def turns(self) -> list[str]:
        """The piped user turns: per file, four model turns around /add, /ls, /run and /drop."""
        lines: list[str] = []
        for step in range(STEPS):
            op, k = step_plan(step)
            name = f"notes_{k}.txt"
            lines += {"read": [f"/add {name}", f"Read {name} and tell me what it records."],
                      "list": ["/ls", "Which files are in the chat now?"],
                      "shell": [f"/run grep -c ledger {name}", f"How many ledger lines has {name}?"],
                      "edit": [f"Mark line {EDITED_LINE} of {name} as edited.", f"/drop {name}"]}[op]
        return [*lines, "Are we done?"]

    def is_main(self, body: JSON) -> bool:
        """The loop's requests are the main model's (the weak model summarises)."""
        return body.get("model") == self.model

    def command(self, work: Path, home: Path, base_url: str) -> tuple[list[str], dict[str, str]]:
        """`aider` in its venv, offline: model metadata from a file, the price list cache pre-seeded."""
        caches = home / ".aider" / "caches"
        caches.mkdir(parents=True, exist_ok=True)
        (caches / "model_prices_and_context_window.json").write_text("{}", encoding="utf-8")
        metadata = {f"openai/{m}": {"max_input_tokens": 200_000, "max_output_tokens": 4096,
                                    "input_cost_per_token": 0.0, "output_cost_per_token": 0.0,
                                    "litellm_provider": "openai", "mode": "chat"}
                    for m in (self.model, self.side_model)}
        (home / "model-metadata.json").write_text(json.dumps(metadata), encoding="utf-8")
        (work / "turns.txt").write_text("\n".join(self.turns()) + "\n", encoding="utf-8")
        env = {"OPENAI_API_BASE": base_url + "/v1", "OPENAI_API_KEY": "sk-e2e-0123456789abcdef",
               "LITELLM_LOCAL_MODEL_COST_MAP": "True", "AIDER_CHECK_UPDATE": "false"}
        argv = [str(AGENTS_DIR / "aider" / "bin" / "aider"), "--model", f"openai/{self.model}",
                "--weak-model", f"openai/{self.side_model}", "--edit-format", "diff",
                "--model-metadata-file", str(home / "model-metadata.json"), "--no-git", "--yes-always",
                "--no-fancy-input", "--no-pretty", "--no-check-update", "--analytics-disable",
                "--no-show-release-notes", "--no-show-model-warnings", "--map-tokens", "0",
                "--no-auto-lint", "--no-suggest-shell-commands", "--no-detect-urls",
                "--encoding", "utf-8"]
        return argv, env

    def stdin(self, work: Path) -> bytes:
        """The piped turns."""
        return (work / "turns.txt").read_bytes()


def _last_user_text(body: JSON) -> str:
    """The text of the request's last user message."""
    users = [m for m in body.get("messages") or [] if m.get("role") == "user"]
    content = users[-1].get("content") if users else ""
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")
