"""Two indexes of delivery_message that no query uses, dropped.

- ``campaign_id`` alone: ``message_campaign_status_idx`` (campaign_id, status) leads with
  the same column and serves every lookup by campaign, the cascade from a deleted campaign
  included.
- ``wamid`` with ``varchar_pattern_ops``: Django adds it beside every unique CharField for
  ``LIKE 'prefix%'``; wamids are only ever looked up whole, through the unique index.

Both were written on every insert, and on every status change (status is indexed, so no
status update is HOT). Measured with bench/webhook_apply.py (30,000 messages, tables
vacuumed before each run, three interleaved pairs): 13,468–13,564 statuses/s without them,
12,463–13,810/s with them, no difference past the noise; the pattern-ops index took
~8 MB per 100,000 messages. They go because nothing reads them.

Only the indexes are dropped. The unique constraint on ``wamid`` stays as it is, under
its own name; the model now declares it as a ``UniqueConstraint`` (which adds no
pattern-ops index), so the state changes without rebuilding it, and the foreign key is not
dropped and re-validated over the whole table as an ``AlterField`` would.
"""

import django.db.models.deletion
from django.db import migrations, models

LIKE_INDEX = "delivery_message_wamid_47d678d2_like"
CAMPAIGN_INDEX = "delivery_message_campaign_id_cc495cce"


class Migration(migrations.Migration):
    dependencies = [
        ("campaigns", "0012_contact_upload_write_percent"),
        ("delivery", "0011_servicewindow_user_as_long_as_a_user_id"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    f"DROP INDEX IF EXISTS {CAMPAIGN_INDEX}",
                    reverse_sql=f"CREATE INDEX {CAMPAIGN_INDEX} ON delivery_message (campaign_id)",
                ),
                migrations.RunSQL(
                    f"DROP INDEX IF EXISTS {LIKE_INDEX}",
                    reverse_sql=(
                        f"CREATE INDEX {LIKE_INDEX} ON delivery_message (wamid varchar_pattern_ops)"
                    ),
                ),
            ],
            state_operations=[
                migrations.AlterField(
                    model_name="message",
                    name="campaign",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="messages",
                        to="campaigns.campaign",
                    ),
                ),
                migrations.AlterField(
                    model_name="message",
                    name="wamid",
                    field=models.CharField(blank=True, max_length=128, null=True),
                ),
                migrations.AddConstraint(
                    model_name="message",
                    constraint=models.UniqueConstraint(
                        fields=("wamid",), name="delivery_message_wamid_key"
                    ),
                ),
            ],
        ),
    ]
