"""``held_for_quality_assessment``: Meta's send response said the message is held (pacing).

Added as ``boolean NOT NULL DEFAULT false``. Since PostgreSQL 11 a constant default of a
new column is kept in the catalog (``pg_attribute.attmissingval``) and read for every row
written before it: no row of ``delivery_message`` (ten million and more) is rewritten, no
index is rebuilt, and the ACCESS EXCLUSIVE lock lasts as long as the catalog update. The
default stays on the column, so the launch's ``INSERT … SELECT`` (which names its columns)
needs no change. No index: the live page counts held rows in the aggregate it already
makes over the campaign's messages, and the guard reads the flag of the rows it fetches.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("delivery", "0013_message_send_status"),
    ]

    operations = [
        migrations.AddField(
            model_name="message",
            name="held_for_quality_assessment",
            field=models.BooleanField(db_default=False, default=False),
        ),
    ]
