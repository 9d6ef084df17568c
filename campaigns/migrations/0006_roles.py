# The Marketing, Support and Operators groups and their permissions (campaigns.roles).

from django.contrib.auth.management import create_permissions
from django.db import migrations


def roles_create(apps, schema_editor):
    # Django creates model permissions after the last migration (post_migrate); the groups
    # need them now, so they are created here first, from the historical models.
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    from campaigns.roles import roles_sync

    roles_sync(registry=apps)


class Migration(migrations.Migration):

    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("campaigns", "0005_contact_upload"),
        ("delivery", "0003_support_actions"),
        ("webhooks", "0002_unmatched_inbound_errors"),
        ("django_rq", "0003_alter_dashboard_permission_names"),
    ]

    operations = [migrations.RunPython(roles_create, migrations.RunPython.noop)]
