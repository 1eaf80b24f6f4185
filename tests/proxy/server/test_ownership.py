"""Which provider objects a pass-through path or a request body names."""

from __future__ import annotations

import pytest

from proxy.server.ownership import Target, referenced, target_of


@pytest.mark.parametrize(("tail", "target"), [
    ("files", Target("file", None)),
    ("files/file-1/content", Target("file", "file-1")),
    ("fine_tuning/jobs/ftjob-9/events", Target("fine-tuning job", "ftjob-9")),
    ("vector_stores/vs%5F1/files", Target("vector store", "vs_1")),
    ("responses/input_tokens", None),
    ("threads/runs", None),
    ("embeddings", None),
])
def test_paths_name_their_collection_and_object(tail: str, target: Target | None) -> None:
    assert target_of(tail) == target


def test_bodies_name_the_objects_they_refer_to_wherever_nested() -> None:
    body = {"previous_response_id": "resp_1", "metadata": {"file_id": "mine-to-name"},
            "input": [{"role": "user", "content": [{"type": "input_file", "file_id": "file-2"}]}],
            "tools": [{"type": "file_search", "vector_store_ids": ["vs_3", "vs_4"]},
                      {"type": "function", "parameters": {"properties": {"file_id": {"type": "string"}}}}]}
    assert sorted(referenced(body)) == [
        ("file_id", "file", "file-2"), ("previous_response_id", "response", "resp_1"),
        ("vector_store_ids", "vector store", "vs_3"), ("vector_store_ids", "vector store", "vs_4")]
    assert referenced({"model": "m", "input": "hi", "file_id": ""}) == []
    assert referenced(None) == []


def test_a_clients_own_metadata_names_no_provider_object() -> None:
    """Codex sends its session ids in `client_metadata`: they are not the Assistants API's threads."""
    codex = {"model": "m", "prompt_cache_key": "01a2", "input": [],
             "client_metadata": {"thread_id": "01a2", "session_id": "01a2", "turn_id": "01a3"}}
    assert referenced(codex) == []
