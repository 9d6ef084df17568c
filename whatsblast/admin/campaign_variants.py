"""The campaign form's A/B test: up to five variant rows, each a template and its mapping.

A row is a small form of its own (prefix ``variant-<n>``): the template, one of the
APPROVED templates (the page offers only those of the chosen number's account), and its
mapping, edited in the page by the same editor as the campaign's own parameters and posted
as JSON. A row without a template is left out; the rows kept become variants A, B, … in
their order (``campaigns.drafts.campaign_variants_set``). With no A/B test (a share of 0)
the rows are not read and the campaign keeps no variants.

A row's mapping must fit its template whole (a draft's own mapping may be saved half done;
a variant is checked as it is added, so the test's rows never hold a half mapping); the
test as a whole is checked as the launch checks it (``variants_errors``).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.db.models import QuerySet

from campaigns.catalogue.sendable import template_unusable_reasons
from campaigns.drafts import MAX_VARIANTS, param_mapping_validate
from campaigns.models import Campaign, Template, TemplateStatus

LABELS = "ABCDE"
MIN_SHOWN = 2  # rows shown on a new test: a test compares at least two


class AccountTaggedSelect(forms.Select):
    """Options carry their WABA (``data-account``): the page offers only templates of the
    chosen number's account."""

    def create_option(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        option: dict[str, Any] = super().create_option(*args, **kwargs)
        instance = getattr(option["value"], "instance", None)
        if instance is not None:
            option["attrs"]["data-account"] = instance.account_id
        return option


class TemplateChoiceField(forms.ModelChoiceField[Template]):
    """Templates by name, each this version cannot send marked so with the reason."""

    def label_from_instance(self, obj: Template) -> str:
        reasons = template_unusable_reasons(obj)
        if not reasons:
            return str(obj)
        return f"{obj} (not usable: {'; '.join(reasons)})"


def approved_templates() -> QuerySet[Template]:
    return Template.objects.filter(status=TemplateStatus.APPROVED).order_by("name", "language")


class VariantForm(forms.Form):
    """One variant row: its template and the mapping for it (both blank: no variant)."""

    template = TemplateChoiceField(
        queryset=Template.objects.none(),
        required=False,
        widget=AccountTaggedSelect(attrs={"class": "wb-variant-template"}),
    )
    param_mapping = forms.JSONField(
        required=False, widget=forms.HiddenInput(attrs={"class": "wb-variant-mapping"})
    )

    def __init__(self, *args: Any, position: int, **kwargs: Any) -> None:
        kwargs["prefix"] = f"variant-{position}"
        super().__init__(*args, **kwargs)
        self.position = position
        field = self.fields["template"]
        field.queryset = approved_templates()  # type: ignore[attr-defined]
        field.label = f"Variant {self.label}"
        field.empty_label = "(no variant)"  # type: ignore[attr-defined]

    @property
    def label(self) -> str:
        return LABELS[self.position]

    @property
    def filled(self) -> bool:
        """Whether the row names a template (as posted, or as saved)."""
        return bool(self["template"].value())

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or {}
        template: Template | None = cleaned.get("template")
        mapping = cleaned.get("param_mapping")
        if template is None:
            cleaned["param_mapping"] = {}
            return cleaned
        if mapping in (None, ""):
            mapping = {}
        if not isinstance(mapping, dict):
            self.add_error(None, "The mapping must be an object of parameters and sources.")
            return cleaned
        try:
            param_mapping_validate(template=template, param_mapping=mapping)
        except ValidationError as exc:
            self.add_error(None, exc.messages[0][:1].upper() + exc.messages[0][1:] + ".")
        cleaned["param_mapping"] = mapping
        return cleaned


class VariantRows:
    """The form's five rows, bound to a POST or showing the campaign's saved variants."""

    def __init__(self, data: Any | None, campaign: Campaign | None) -> None:
        saved: dict[int, dict[str, Any]] = {}
        if campaign is not None and campaign.pk:
            for position, variant in enumerate(campaign.variants.order_by("position")):
                saved[position] = {
                    "template": variant.template_id,
                    "param_mapping": variant.param_mapping,
                }
        self.forms = [
            VariantForm(data, position=position, initial=saved.get(position))
            for position in range(MAX_VARIANTS)
        ]

    def is_valid(self) -> bool:
        return all([row.is_valid() for row in self.forms])  # every row checked: each shows its own

    def account_check(self, account_id: int) -> None:
        """Each chosen template must be of the number's account (the page offers no other)."""
        for row in self.forms:
            template = row.cleaned_data.get("template") if hasattr(row, "cleaned_data") else None
            if template is not None and template.account_id != account_id:
                row.add_error(None, "This template belongs to another WABA than the number.")

    def chosen(self) -> list[tuple[Template, dict[str, Any]]]:
        """(template, mapping) of each row with a template, in order (call after is_valid)."""
        return [
            (row.cleaned_data["template"], row.cleaned_data["param_mapping"])
            for row in self.forms
            if row.cleaned_data.get("template") is not None
        ]

    @property
    def shown(self) -> int:
        """Rows the page shows at first: every filled one, and at least two."""
        filled = [row.position for row in self.forms if row.filled]
        return max(MIN_SHOWN, max(filled, default=-1) + 1)

    def rows(self) -> list[dict[str, Any]]:
        """For the template: each row with whether it starts hidden."""
        shown = self.shown
        return [{"form": row, "hidden": row.position >= shown} for row in self.forms]
