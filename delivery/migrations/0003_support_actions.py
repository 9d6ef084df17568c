# Support audit trail for dead letters, their custom permissions, a created_at index.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('delivery', '0002_api_keys'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='SupportAction',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('action', models.CharField(choices=[('requeued', 'Requeued'), ('discarded', 'Discarded')], max_length=16)),
                ('username', models.CharField(max_length=150)),
                ('note', models.TextField(blank=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
            ],
            options={
                'ordering': ('-created_at', '-id'),
            },
        ),
        migrations.AlterModelOptions(
            name='deadletter',
            options={'ordering': ('-created_at',), 'permissions': [('requeue_deadletter', 'Can requeue dead letters (fresh attempts)'), ('discard_deadletter', 'Can discard dead letters')]},
        ),
        migrations.AddIndex(
            model_name='deadletter',
            index=models.Index(fields=['-created_at'], name='deadletter_created_idx'),
        ),
        migrations.AddField(
            model_name='supportaction',
            name='dead_letter',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='actions', to='delivery.deadletter'),
        ),
        migrations.AddField(
            model_name='supportaction',
            name='user',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
    ]
