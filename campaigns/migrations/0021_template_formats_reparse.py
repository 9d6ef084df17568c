"""Read again, from the components each template row keeps, what this version parses:
carousel cards, limited-time offers, product headers and the send-time role of coupon,
Flow, catalogue and multi-product buttons. Rows synced before it would otherwise wait for
the next template sync (campaigns.catalogue.sendable names them unusable until then)."""

from typing import Any

from django.db import migrations


def reparse(apps: Any, schema_editor: Any) -> None:
    from campaigns.catalogue.components import components_parse

    template_model = apps.get_model("campaigns", "Template")
    for template in template_model.objects.exclude(components=[]).iterator():
        parsed = components_parse(template.components)
        template.cards = parsed.cards
        template.offer = parsed.offer
        template.buttons = parsed.buttons
        template.header_format = parsed.header_format
        template.save(update_fields=["cards", "offer", "buttons", "header_format"])


class Migration(migrations.Migration):
    dependencies = [("campaigns", "0020_marketing_messages_api")]

    operations = [migrations.RunPython(reparse, migrations.RunPython.noop)]
