from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("campaigns", "0013_contact_parent_user_id_username"),
    ]

    # A constant database default: PostgreSQL adds the column to a table of millions of
    # contacts without rewriting it.
    operations = [
        migrations.AddField(
            model_name="contact",
            name="opted_out_reason",
            field=models.CharField(
                blank=True,
                db_default="",
                default="",
                max_length=200,
                verbose_name="opt-out reason",
            ),
        ),
    ]
