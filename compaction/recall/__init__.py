"""Recall: the tools the model may call to search and expand what was compacted, within the budget.

The recall tools' face, part of compaction's (`from compaction import recall`): the five calls proxy/
and replay/ make on them.
"""

from compaction.recall.tools import execute, is_recall_tool, offered_for_request, should_offer, tool_schemas

__all__ = ["execute", "is_recall_tool", "offered_for_request", "should_offer", "tool_schemas"]
