"""Provider objects a tenant created are its own, on SQLite and PostgreSQL alike."""

from __future__ import annotations

from store.interface import TenantAccess


def test_objects_are_owned_by_the_tenant_that_recorded_them(alice: TenantAccess, bob: TenantAccess) -> None:
    alice.record_objects("file", ["file-a1", "file-a2"])
    alice.record_objects("file", ["file-a1"])  # recorded again: no error, still one
    bob.record_objects("response", ["resp_b1"])
    assert alice.owned_objects(["file-a1", "file-a2", "resp_b1", "file-x"]) == {"file-a1", "file-a2"}
    assert bob.owned_objects(["file-a1", "file-a2", "resp_b1"]) == {"resp_b1"}
    assert alice.owned_objects([]) == set()


def test_forgotten_objects_are_no_longer_owned(alice: TenantAccess, bob: TenantAccess) -> None:
    alice.record_objects("file", ["file-a1", "file-a2"])
    bob.forget_objects(["file-a1"])  # not bob's: nothing happens
    alice.forget_objects(["file-a2"])
    assert alice.owned_objects(["file-a1", "file-a2"]) == {"file-a1"}


def test_many_ids_are_looked_up_in_chunks(alice: TenantAccess) -> None:
    ids = [f"file-{i}" for i in range(1_200)]
    alice.record_objects("file", ids[::2])
    assert alice.owned_objects(ids) == set(ids[::2])
