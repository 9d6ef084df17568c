"""Recording a template of a number's account by hand (the sync records Meta's own)."""

from __future__ import annotations

from campaigns.catalogue.numbers import phone_number_get
from campaigns.catalogue.params import template_params_parse
from campaigns.models import Template, TemplateCategory, TemplateStatus


def template_add(
    *,
    phone_number_id: str,
    name: str,
    language: str,
    body_text: str = "",
    category: str = TemplateCategory.MARKETING,
    status: str = TemplateStatus.APPROVED,
) -> Template:
    """Record a template of the number's WABA, with its body params parsed from the body."""
    number = phone_number_get(phone_number_id)
    count, names = template_params_parse(body_text)
    template = Template(
        account=number.account,
        name=name.strip(),
        language=language.strip(),
        category=category.upper(),
        status=status.upper(),
        body_text=body_text,
        body_param_count=count,
        body_param_names=names,
    )
    template.full_clean()
    template.save()
    return template
