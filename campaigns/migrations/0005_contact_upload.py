# Contact files uploaded in the admin and their background import.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('campaigns', '0004_campaign_canary'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='ContactUpload',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('original_name', models.CharField(max_length=255)),
                ('stored_name', models.CharField(editable=False, max_length=100)),
                ('size_bytes', models.BigIntegerField(default=0)),
                ('file_format', models.CharField(blank=True, max_length=8)),
                ('rows_estimate', models.PositiveIntegerField(blank=True, null=True)),
                ('region', models.CharField(blank=True, help_text='For numbers without +country.', max_length=2, verbose_name='default country')),
                ('phone_column', models.CharField(blank=True, max_length=200)),
                ('name_column', models.CharField(blank=True, max_length=200)),
                ('attribute_columns', models.JSONField(blank=True, default=list)),
                ('status', models.CharField(choices=[('mapping', 'Waiting for the column choice'), ('queued', 'Queued'), ('running', 'Importing'), ('done', 'Done'), ('failed', 'Failed')], default='mapping', max_length=16)),
                ('rows_read', models.PositiveIntegerField(default=0)),
                ('result', models.JSONField(blank=True, default=dict)),
                ('error', models.TextField(blank=True)),
                ('rejects_name', models.CharField(blank=True, editable=False, max_length=100)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('started_at', models.DateTimeField(blank=True, null=True)),
                ('progress_at', models.DateTimeField(blank=True, null=True)),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('contact_list', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='uploads', to='campaigns.contactlist')),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ('-created_at',),
            },
        ),
    ]
