"""``send_status``: the indexes key on it, so a delivery receipt's UPDATE is HOT.

Every status callback moved ``status``, and ``status`` was in five of the table's
thirteen indexes (as a column or in a partial index's condition), so PostgreSQL could never
update a row in place: each receipt wrote a new heap tuple and an entry in every index
(0 HOT updates of 1.36 million in ``pg_stat_user_tables``). ``send_status`` is ``status``
with delivered and read folded into sent, stored by PostgreSQL itself (a generated
column, so no writer can let it drift). The five indexes now name it instead, and a
receipt (sent → delivered → read) changes no indexed column.

HOT also needs room on the row's page for the new version: the table's fillfactor drops
to 80, set before the column is added so the rewrite that adding a stored generated
column makes already leaves that room on every page.

The rewrite holds an ACCESS EXCLUSIVE lock on ``delivery_message`` for its length (see
docs/operations.md, section 2, item 4, "Migrations that rewrite a table"); the five
indexes are dropped before it and built after it, so the rewrite does not rebuild them
twice.
"""

from django.db import migrations, models

FILLFACTOR_SQL = "ALTER TABLE delivery_message SET (fillfactor = 80)"
FILLFACTOR_RESET_SQL = "ALTER TABLE delivery_message RESET (fillfactor)"


class Migration(migrations.Migration):
    dependencies = [
        ("campaigns", "0012_contact_upload_write_percent"),
        ("delivery", "0012_message_two_indexes_fewer"),
    ]

    operations = [
        migrations.RunSQL(FILLFACTOR_SQL, FILLFACTOR_RESET_SQL),
        migrations.RemoveIndex(model_name="message", name="message_pending_txn_idx"),
        migrations.RemoveIndex(model_name="message", name="message_in_doubt_idx"),
        migrations.RemoveIndex(model_name="message", name="message_campaign_status_idx"),
        migrations.RemoveIndex(model_name="message", name="message_pending_claim_idx"),
        migrations.RemoveIndex(model_name="message", name="message_settled_recent_idx"),
        migrations.AddField(
            model_name="message",
            name="send_status",
            field=models.GeneratedField(
                db_persist=True,
                expression=models.Case(
                    models.When(status__in=("delivered", "read"), then=models.Value("sent")),
                    default=models.F("status"),
                ),
                output_field=models.CharField(max_length=16),
            ),
        ),
        migrations.AddIndex(
            model_name="message",
            index=models.Index(
                condition=models.Q(("send_status", "pending")),
                fields=["campaign", "phone_number", "next_attempt_at"],
                name="message_pending_claim_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="message",
            index=models.Index(
                condition=models.Q(("kind", "transactional"), ("send_status", "pending")),
                fields=["phone_number", "next_attempt_at"],
                name="message_pending_txn_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="message",
            index=models.Index(
                condition=models.Q(("send_status__in", ("sending", "unknown"))),
                fields=["claimed_at"],
                name="message_in_doubt_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="message",
            index=models.Index(
                fields=["campaign", "send_status"], name="message_campaign_status_idx"
            ),
        ),
        migrations.AddIndex(
            model_name="message",
            index=models.Index(
                condition=models.Q(("send_status__in", ("sent", "failed"))),
                fields=["campaign", "id"],
                name="message_settled_recent_idx",
            ),
        ),
    ]
