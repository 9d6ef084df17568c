from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("campaigns", "0012_contact_upload_write_percent"),
    ]

    # Nullable columns without a default: PostgreSQL adds each to a table of millions of
    # contacts without rewriting it.
    operations = [
        migrations.AddField(
            model_name="contact",
            name="parent_user_id",
            field=models.CharField(
                blank=True,
                help_text=(
                    "Parent business-scoped user id (e.g. US.ENT.11815799212886844830), from Meta."
                ),
                max_length=140,
                null=True,
                verbose_name="WhatsApp parent user id",
            ),
        ),
        migrations.AddField(
            model_name="contact",
            name="username",
            field=models.CharField(
                blank=True,
                help_text=(
                    "The user's WhatsApp username, without its leading @, as Meta last gave it."
                ),
                max_length=100,
                null=True,
                verbose_name="WhatsApp username",
            ),
        ),
    ]
