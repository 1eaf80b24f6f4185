"""Anchors: concrete facts and the agent index extracted from messages, and the block that renders them."""
