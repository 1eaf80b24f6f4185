"""Versioned summarizer prompts, the summary message format, and the source text given to a summarizer.

Bump PROMPT_VERSION whenever a prompt's wording changes: it is recorded with every summary and
compaction event, so a summary can be traced to the prompt that wrote it.
"""

from __future__ import annotations

from collections.abc import Sequence

from compaction.summarize.redact import redact
from compaction.types import PromptLevel, SummaryRequest
from store.encoding.content import message_text
from store.models import Message, StoredMessage, SummaryKind, SummaryRecord

PROMPT_VERSION = "2026-12-03.1"
SECTIONS = ("Intent", "Decisions", "Files and artifacts", "Errors and fixes",
            "Open operations and approvals", "Next steps")
EXPAND_LINE_PREFIX = "Expand for details about:"
TOOL_RESULT_HEAD_CHARS = 1_500
TOOL_RESULT_TAIL_CHARS = 500

_EXTRACTIVE_RULES = """Rules (strict):
- Be extractive. Never introduce a number, name, id, date, amount, path or decision that is not \
written in the text below. Copy such values exactly as written; never convert units or round.
- Concrete facts (ids, amounts, dates, names, paths) are also kept separately as anchors, so you \
may refer to them briefly, but never change them.
- A later correction replaces an earlier value: keep only the corrected value.
- Do not promote a discarded idea or an open question to a decision.
- Keep unresolved errors, pending approvals and operations with unknown status explicitly open.
- Write in the language of the conversation. No preamble, no closing remarks."""

_FORMAT = "\n".join(f"## {s}" for s in SECTIONS) + \
    f"\n{EXPAND_LINE_PREFIX} <topic (#id, #id)>, <topic (#id)>, ..."
_SECTION_GUIDE = """What goes where (agent sessions are mostly tool calls; keep what the agent needs later):
- Intent: the user's original request and any later change of intent, in their words.
- Decisions: what was decided or chosen, with the reason when given; never a discarded idea.
- Files and artifacts: every file created, edited or read (path as written, what was done, #ids), \
and the tool calls that matter with their key argument (the command, the file, the pattern).
- Errors and fixes: each error with its exact message line, and the fix that resolved it; an \
unresolved error stays here as open.
- Open operations and approvals: calls without a result, background tasks, pending approvals, \
operations whose outcome is unknown (with their ids).
- Next steps: the last state of the task (what was just done, what is in progress) and what comes next.
Cite source messages as #<message id>. The last line names the topics to expand with their message \
ids, e.g. "Expand for details about: the parser rewrite (#<id>, #<id>), the failing test run (#<id>)"."""
_FORMAT_RULES = f"""Answer in exactly this structure (write "- none" under an empty section):
{_FORMAT}

{_SECTION_GUIDE}"""

_LEVEL_FOCUS = {
    "normal": "Keep the decisions and their rationale, file operations (which files were created, "
              "changed or read, and why), active tasks and their state.",
    "aggressive": "Be brief: keep only durable facts, TODOs and the current task state. Drop "
                  "rationale, exploration and anything already resolved.",
}
_KIND_INTRO = {
    "leaf": "Summarise the following part of a conversation between a user and an assistant. "
            "Each message is prefixed with [#<message id> <role>].",
    "condensed": "Merge the following summaries of consecutive parts of one conversation (oldest "
                 "first) into one summary of the whole span.",
}


def system_prompt(kind: SummaryKind, level: PromptLevel) -> str:
    """The summarizer's system prompt for a kind (leaf/condensed) and escalation level."""
    return "\n\n".join([
        "You compact conversation history for a proxy that keeps the full history elsewhere.",
        _KIND_INTRO[kind], _LEVEL_FOCUS[level], _EXTRACTIVE_RULES, _FORMAT_RULES])


def user_prompt(sources_text: str, anchors_text: str, target_tokens: int) -> str:
    anchors = f"Anchors already kept verbatim:\n{anchors_text}\n\n" if anchors_text.strip() else ""
    return (f"{anchors}Text to summarise:\n<text>\n{sources_text}\n</text>\n\n"
            f"Write at most about {target_tokens} tokens.")


def build_request(kind: SummaryKind, level: PromptLevel, sources_text: str, anchors_text: str,
                  target_tokens: int) -> SummaryRequest:
    """A complete SummaryRequest for one escalation level."""
    return SummaryRequest(system_prompt=system_prompt(kind, level),
                          user_prompt=user_prompt(sources_text, anchors_text, target_tokens),
                          target_tokens=target_tokens, prompt_version=PROMPT_VERSION, level=level)


def summary_open_tag(record: SummaryRecord) -> str:
    return (f'<ctxproxy:summary id="{record.id}" depth="{record.depth}" '
            f'messages="{record.first_seq}-{record.last_seq}">')


def render_summary_message(record: SummaryRecord, *, tools_offered: bool,
                           expand_tool_name: str) -> Message:
    """The system message standing in for a summary's sources in the forwarded context.

    The retrieval hint, and the stored summary's "Expand for details about:" line, appear only when
    the expand tool is really offered to the model in this request.
    """
    content = record.content.strip()
    if not tools_offered:
        content = "\n".join(line for line in content.splitlines()
                            if not line.lstrip().startswith(EXPAND_LINE_PREFIX)).rstrip()
    lines = [summary_open_tag(record),
             f"Summary of earlier conversation messages {record.first_seq}-{record.last_seq}.",
             content]
    if tools_offered:
        lines.append(f'Call {expand_tool_name} with ids ["{record.id}"] to see the original messages.')
    lines.append("</ctxproxy:summary>")
    return {"role": "system", "content": "\n".join(lines)}


def bound_text(text: str, label: str, head: int = TOOL_RESULT_HEAD_CHARS,
               tail: int = TOOL_RESULT_TAIL_CHARS) -> str:
    """Head and tail of a long text with a marker saying how much was cut and where the rest is."""
    if len(text) <= head + tail:
        return text
    omitted = len(text) - head - tail
    marker = f"[... {omitted} characters cut from #{label}; the full text is in the stored history ...]"
    return f"{text[:head]}\n{marker}\n{text[-tail:]}"


def _source_block(item: StoredMessage | SummaryRecord) -> str:
    if isinstance(item, SummaryRecord):
        return f"[{item.id} summary of messages {item.first_seq}-{item.last_seq}]\n{item.content.strip()}"
    text = message_text(item.message)
    if item.role == "tool":
        text = bound_text(text, str(item.id))
    return f"[#{item.id} {item.role}]\n{text}"


def build_source_text(items: Sequence[StoredMessage | SummaryRecord]) -> str:
    """The text handed to a summarizer: one block per message/summary, secrets redacted."""
    return redact("\n\n".join(_source_block(item) for item in items))
