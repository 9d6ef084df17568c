"""POST /contacts while a contact file is being imported: the batch is refused with a 409
and Retry-After, nothing of it written, instead of locking the same contacts in another
order than the import and risking a deadlock that PostgreSQL might settle by aborting the
import. Once the import has committed, the same batch goes through."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from django.db import connection

from campaigns.audience.importing import contacts_import
from campaigns.audience.writer import import_lock_share
from campaigns.models import Contact, ContactList
from tests.api.test_contacts_api import Caller, issued

IMPORTED = [f"+55119876{n:05d}" for n in range(50)]
SENT = IMPORTED[40:] + [f"+55119877{n:05d}" for n in range(10)]


@pytest.mark.django_db(transaction=True)
def test_a_batch_during_an_import_is_refused_whole_then_goes_through(tmp_path: Path) -> None:
    csv = tmp_path / "file.csv"
    csv.write_text("phone,name\n" + "".join(f"{p},Imported\n" for p in IMPORTED))
    staged, go_on = threading.Event(), threading.Event()
    failure: list[BaseException] = []

    def importing() -> None:
        def progress(rows: int) -> None:
            staged.set()  # the import's transaction holds its lock and the contacts it wrote
            assert go_on.wait(30)

        try:
            contacts_import(path=csv, list_name="file", batch_size=20, progress=progress)
        except BaseException as exc:  # noqa: BLE001 - reported to the test's thread
            failure.append(exc)
            staged.set()
        finally:
            connection.close()

    api = Caller(issued("contacts"))
    batch = {"contacts": [{"phone": p, "attributes": {"tier": "gold"}} for p in SENT]}
    worker = threading.Thread(target=importing)
    worker.start()
    try:
        assert staged.wait(30) and not failure
        response, body = api("POST", "/contacts", batch, **{"Idempotency-Key": "sync-1"})
        assert response.status_code == 409
        assert body["error"]["code"] == "contacts_import_running"
        assert response["Retry-After"] == "5"
    finally:
        go_on.set()
        worker.join(60)
    assert not worker.is_alive() and not failure
    assert not Contact.objects.filter(attributes__tier="gold").exists()
    assert Contact.objects.filter(phone__in=IMPORTED).count() == len(IMPORTED)

    # The refusal was not stored as the key's answer: the retry is written, not replayed.
    response, body = api("POST", "/contacts", batch, **{"Idempotency-Key": "sync-1"})
    assert response.status_code == 201 and "Idempotent-Replayed" not in response
    assert (body["created"], body["updated"]) == (10, 10)
    gold = Contact.objects.filter(attributes__tier="gold")
    assert set(gold.values_list("phone", flat=True)) == set(SENT)
    file_list = ContactList.objects.get(name="file")
    assert set(gold.filter(lists=file_list).values_list("phone", flat=True)) == set(IMPORTED[40:])


@pytest.mark.django_db(transaction=True)
def test_the_shared_import_lock_is_refused_outside_a_transaction() -> None:
    """Outside one, PostgreSQL would let go of it at once and guard nothing."""
    with pytest.raises(RuntimeError, match="in a transaction"):
        import_lock_share(wait_s=0)
