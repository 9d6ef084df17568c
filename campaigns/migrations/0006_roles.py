# The Marketing, Support and Operators groups used to be created here. They are kept
# current after every `migrate` instead, by whatsblast's post_migrate handler
# (whatsblast.apps, whatsblast.auth.roles), once every app's permissions exist; a domain
# migration does not reach into the site's code. Databases that ran this already keep
# their groups.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("campaigns", "0005_contact_upload"),
        ("delivery", "0003_support_actions"),
        ("webhooks", "0002_unmatched_inbound_errors"),
        ("django_rq", "0003_alter_dashboard_permission_names"),
    ]

    operations = [migrations.RunPython(migrations.RunPython.noop, migrations.RunPython.noop)]
