from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("campaigns", "0011_contact_upload_duplicate_policy"),
    ]

    operations = [
        migrations.AddField(
            model_name="contactupload",
            name="write_percent",
            field=models.PositiveSmallIntegerField(blank=True, editable=False, null=True),
        ),
    ]
