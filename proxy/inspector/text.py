"""Terminal rendering of the inspection model (rich): tables, a summary tree, occupancy bars.

Only formatting lives here; every fact comes from proxy/inspector/view.py so the text, the JSON and the
web UI never disagree.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

BAR_WIDTH = 40
CATEGORY_STYLE = {
    "system": "magenta",
    "anchors": "yellow",
    "summaries": "cyan",
    "fresh_tail": "green",
    "tools": "blue",
    "free": "bright_black",
}
STATUS_STYLE = {"raw": "green", "summarised": "cyan", "pinned": "yellow"}


def when(ts: float | None) -> str:
    """Epoch seconds as a short UTC timestamp ("-" when unknown)."""
    if not ts:
        return "-"
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def render_list(rows: Sequence[Mapping[str, Any]], console: Console) -> None:
    """The tenant's conversations, newest first."""
    if not rows:
        console.print("No conversations for this tenant.")
        return
    table = Table(title="Conversations", title_justify="left")
    for col in ("id", "model", "messages", "summaries", "last update", "external id", "forked from"):
        table.add_column(col, no_wrap=col == "id")
    for r in rows:
        table.add_row(r["id"], r["model"], str(r["message_count"]), str(r["summary_count"]),
                      when(r["updated_at"]), r["external_id"] or "", r["forked_from"] or "")
    console.print(table)


def render_conversation(data: Mapping[str, Any], console: Console) -> None:
    """All sections of one conversation, in reading order."""
    render_header(data, console)
    render_occupancy(data["occupancy"], data["prefix_stability"], console)
    render_cost(data["cost"], console)
    render_summary_tree(data["summaries"], console)
    render_anchors(data["anchors"], console)
    render_timeline(data["timeline"], console)
    render_events(data["events"], console)


def render_header(data: Mapping[str, Any], console: Console) -> None:
    conv, totals, view = data["conversation"], data["totals"], data["view"]
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    rows = [
        ("Conversation", conv["id"]),
        ("Tenant", conv["tenant_id"]),
        ("Model", conv["model"]),
        ("External id", conv["external_id"] or "-"),
        ("Forked from", conv["forked_from"] or "-"),
        ("Messages", f"{totals['messages']} ({totals['message_tokens']:,} tokens): {totals['raw']} raw, "
                     f"{totals['summarised']} summarised, {totals['pinned']} pinned"),
        ("Summaries", str(totals["summaries"])),
        ("Anchors", f"{totals['anchors_active']} active, {totals['anchors_superseded']} superseded"),
        ("View", f"version {view['version']}, covers seq 0..{view['covered_through_seq']}" if view
         else "none (no compaction yet)"),
        ("Created", when(conv["created_at"])),
        ("Updated", when(conv["updated_at"])),
    ]
    for label, value in rows:
        table.add_row(label, value)
    console.print(table)


def occupancy_bar(tokens: int, budget: int, style: str, width: int = BAR_WIDTH) -> Text:
    """A horizontal bar of `width` cells, filled in proportion to tokens / budget."""
    filled = 0 if budget <= 0 else min(width, round(width * tokens / budget))
    bar = Text("█" * filled, style=style)
    bar.append("░" * (width - filled), style="bright_black")
    return bar


def render_occupancy(occ: Mapping[str, Any], stability: Mapping[str, Any], console: Console) -> None:
    """Latest request as bars per category, then the series over requests."""
    latest = occ["latest"]
    console.print()
    if latest is None:
        console.print("[bold]Budget occupancy[/bold]: no forwarded request recorded yet.")
        return
    console.print(f"[bold]Budget occupancy[/bold] (latest request #{latest['request']}, "
                  f"budget {latest['budget']:,} tokens, forwarded {latest['tokens_forwarded']:,} "
                  f"of {latest['tokens_received']:,} received)")
    bars = Table.grid(padding=(0, 1))
    for _ in range(4):
        bars.add_column()
    for cat in occ["categories"]:
        tokens = latest["occupancy"][cat]
        pct = 100.0 * tokens / latest["budget"] if latest["budget"] else 0.0
        bars.add_row(f"  {cat:<10}", occupancy_bar(tokens, latest["budget"], CATEGORY_STYLE[cat]),
                     Text(f"{tokens:>9,}", justify="right"), f"{pct:5.1f}%")
    console.print(bars)
    console.print(prefix_line(stability))
    render_series(occ, console)


def prefix_line(stability: Mapping[str, Any]) -> str:
    """E.g. `Prefix stability: 4/5 consecutive requests extended the previous one (80.0%)`."""
    if stability["rate"] is None:
        return "Prefix stability: n/a (fewer than two forwarded requests)"
    return (f"Prefix stability: {stability['stable']}/{stability['comparable']} consecutive requests "
            f"extended the previous one ({100.0 * stability['rate']:.1f}%)")


def render_cost(cost: Mapping[str, Any], console: Console) -> None:
    """What the forwarded requests shared, what the provider read from its cache, and the billed
    input estimated beside the whole history's (both summed over the conversation's requests)."""
    console.print()
    if not cost["requests"]:
        return
    console.print(f"[bold]Cost[/bold] over {cost['requests']:,} forwarded requests: "
                  f"{cost['tokens_forwarded']:,} tokens forwarded, {cost['prefix_tokens']:,} "
                  f"in prefixes shared with the previous request")
    console.print(f"  provider cache reads: {cost['cache_read_tokens']:,} tokens "
                  f"({cost['cache_reads_reported']:,} of {cost['requests']:,} replies reported them)")
    console.print(f"  billed input (estimate): {cost['billed_input_estimate']:,} tokens, full history "
                  f"{cost['full_history_billed_estimate']:,}: {saving_text(cost)}")


def saving_text(cost: Mapping[str, Any]) -> str:
    """E.g. `compaction saved 1,200 (40.0%)` or `compaction cost 300 more (10.0%)`."""
    saved, full = cost["saved_estimate"], cost["full_history_billed_estimate"]
    share = f" ({100.0 * abs(saved) / full:.1f}%)" if full else ""
    return f"compaction saved {saved:,}{share}" if saved >= 0 else f"compaction cost {-saved:,} more{share}"


def render_series(occ: Mapping[str, Any], console: Console) -> None:
    table = Table(title="Occupancy over requests (tokens)", title_justify="left")
    for col in ("req", "view", "received", "forwarded", "budget", *occ["categories"], "compacted", "prefix",
                "prefix tok", "billed est", "full est", "cache read"):
        table.add_column(col, justify="right")
    for p in occ["series"]:
        prefix = {None: "-", True: "extends", False: "BROKEN"}[p["extends_previous"]]
        table.add_row(str(p["request"]), str(p["view_version"]), f"{p['tokens_received']:,}",
                      f"{p['tokens_forwarded']:,}", f"{p['budget']:,}",
                      *(f"{p['occupancy'][c]:,}" for c in occ["categories"]),
                      "yes" if p["compacted"] else "no", prefix, f"{p['prefix_tokens']:,}",
                      f"{p['billed_input_estimate']:,}", f"{p['full_history_billed_estimate']:,}",
                      "-" if p["cache_read_tokens"] is None else f"{p['cache_read_tokens']:,}")
    console.print(table)


def summary_label(node: Mapping[str, Any]) -> Text:
    """`sum_x  leaf d0 g1 · seq 0-15 · 410 tok · normal · local/extractive @ v1 · in_view`."""
    label = Text(node["id"], style="bold cyan")
    label.append(f"  {node['kind']} d{node['depth']} g{node['generation']}")
    label.append(f" · seq {node['first_seq']}-{node['last_seq']} · {node['token_count']:,} tok")
    label.append(f" · {node['level']} · {node['model'] or '?'} @ {node['prompt_version'] or '?'}")
    label.append(f" · {node['status']}", style="green" if node["status"] == "in_view" else "dim")
    return label


def render_summary_tree(summaries: Mapping[str, Any], console: Console) -> None:
    """Roots (summaries nothing condenses) with their condensed sources nested below."""
    console.print()
    nodes = {n["id"]: n for n in summaries["nodes"]}
    if not nodes:
        console.print("[bold]Summaries[/bold]: none.")
        return
    tree = Tree(f"[bold]Summaries[/bold] ({len(nodes)}, max depth {summaries['max_depth']}, "
                f"{summaries['generations']} generations)")

    def add(parent: Tree, sid: str) -> None:
        node = nodes.get(sid)
        if node is None:
            parent.add(Text(f"{sid} (missing)", style="red"))
            return
        branch = parent.add(summary_label(node))
        if node["kind"] == "leaf":
            branch.add(Text(f"{len(node['source_seqs'])} messages: seq {_ranges(node['source_seqs'])}",
                            style="dim"))
        for kid in node["children"]:
            add(branch, kid)

    for root in summaries["roots"]:
        add(tree, root)
    console.print(tree)


def _ranges(seqs: Sequence[int]) -> str:
    """[0,1,2,5,6] -> "0-2, 5-6"."""
    if not seqs:
        return "-"
    out: list[str] = []
    start = prev = seqs[0]
    for s in [*seqs[1:], None]:
        if s is not None and s == prev + 1:
            prev = s
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if s is not None:
            start = prev = s
    return ", ".join(out)


def render_anchors(anchors: Sequence[Mapping[str, Any]], console: Console) -> None:
    """Active values plain, superseded ones struck through with what replaced them."""
    console.print()
    if not anchors:
        console.print("[bold]Anchors[/bold]: none.")
        return
    table = Table(title="Anchors", title_justify="left")
    for col in ("id", "kind", "key", "value", "status", "supersession", "source seq"):
        table.add_column(col)
    for a in anchors:
        active = a["status"] == "active"
        value = Text(a["value"], style="" if active else "strike dim")
        if a["superseded_by"] is not None:
            note = f"replaced by #{a['superseded_by']} ({a['superseded_by_value'] or '?'})"
        elif a["supersedes"]:
            note = "replaces " + ", ".join(f"#{i}" for i in a["supersedes"])
        else:
            note = ""
        table.add_row(str(a["id"]), a["kind"], a["key"], value, a["status"], note,
                      "-" if a["source_seq"] is None else str(a["source_seq"]))
    console.print(table)


def timeline_groups(rows: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """Consecutive summarized messages under the same summary form one group; others stand alone."""
    groups: list[list[Mapping[str, Any]]] = []
    for r in rows:
        last = groups[-1][-1] if groups else None
        if (last is not None and r["status"] == "summarised" and last["status"] == "summarised"
                and r["summary_id"] == last["summary_id"]):
            groups[-1].append(r)
        else:
            groups.append([r])
    return groups


def render_timeline(rows: Sequence[Mapping[str, Any]], console: Console) -> None:
    """One line per raw or pinned message; a summarized run is one line naming its summary."""
    console.print()
    table = Table(title="Timeline", title_justify="left")
    for col, justify in (("seq", "right"), ("role", "left"), ("tokens", "right"), ("status", "left"),
                         ("summary", "left"), ("preview", "left")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for group in timeline_groups(rows):
        first, last = group[0], group[-1]
        seq = str(first["seq"]) if len(group) == 1 else f"{first['seq']}-{last['seq']}"
        role = first["role"] if len(group) == 1 else f"{len(group)} msgs"
        summary = f"{first['summary_id']} (d{first['summary_depth']})" if first["summary_id"] else ""
        tokens = sum(int(r["token_count"]) for r in group)
        status = Text(first["status"], style=STATUS_STYLE.get(first["status"], ""))
        text = Text(first["preview"], overflow="ellipsis", no_wrap=True)
        table.add_row(seq, role, f"{tokens:,}", status, summary, text)
    console.print(table)


def render_events(events: Sequence[Mapping[str, Any]], console: Console) -> None:
    """Compaction steps with their provenance; errors and rejected facts listed below the table."""
    console.print()
    if not events:
        console.print("[bold]Compaction events[/bold]: none.")
        return
    table = Table(title="Compaction events", title_justify="left")
    for col in ("#", "time", "trigger", "tier/level", "outcome", "summary", "sources", "tokens",
                "verify", "anchors", "model @ prompt", "ms"):
        table.add_column(col)
    for e in events:
        summary = f"{e['summary_id']} d{e['depth']} g{e['generation']}" if e["summary_id"] else "-"
        sources = _sources(e)
        table.add_row(str(e["id"] if e["id"] is not None else "-"), when(e["created_at"])[-8:], e["trigger"],
                      f"{e['tier']}/{e['level']}", e["outcome"], summary, sources,
                      f"{e['tokens_before']:,}→{e['tokens_after']:,}", e["verification"],
                      f"+{len(e['anchors_added'])}/-{len(e['anchors_superseded'])}",
                      f"{e['summarizer_model']} @ {e['prompt_version'] or '?'}", f"{e['duration_ms']:.0f}")
    console.print(table)
    for e in events:
        if e["error"] or e["rejected_facts"]:
            detail = f"  event {e['id']}: "
            if e["rejected_facts"]:
                detail += "rejected facts: " + ", ".join(e["rejected_facts"]) + ". "
            if e["error"]:
                detail += f"error: {e['error']}"
            console.print(Text(detail, style="red"))


def _sources(event: Mapping[str, Any]) -> str:
    msgs, sums = event["source_message_ids"], event["source_summary_ids"]
    parts = []
    if msgs:
        parts.append(f"{len(msgs)} msgs")
    if sums:
        parts.append(f"{len(sums)} sums")
    return ", ".join(parts) or "-"
