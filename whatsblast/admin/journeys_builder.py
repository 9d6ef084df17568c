"""The journey builder: create and edit a journey without writing JSON.

The page (``templates/admin/journeys/journey/builder.html``, driven by
``static/whatsblast/journey_builder.js``) edits a journey's definition (the JSON contract
of ``journeys.definition``) as rows: the entry, the settings, the steps. The definition
lives in the ``definition`` textarea as JSON, which the builder rewrites after every change
and the "JSON" tab shows (and accepts) as it is. The form posts it whole; the server checks
it with ``journeys.versions.definition_check`` and, when it cannot run, shows the form again
with every problem by its path (``steps[2].timeout``), each next to the row or field the
path names, and saves nothing. ``check/`` answers the same check as JSON while editing.

Saving a journey that has been live makes a new version that everyone waiting moves to: the
page asks first, saying how many wait at each step and who leaves (those at a step the new
version removes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count
from django.http import HttpRequest

from campaigns.catalogue.params import template_param_slots
from campaigns.catalogue.sendable import template_unusable_reasons
from campaigns.models import PhoneNumber, Segment, Template
from delivery.segments.admin_support import attribute_keys
from delivery.segments.rules import CONTACT_FIELDS, FIELD_OPS, OPS
from journeys.definition import (
    LAST_MESSAGE_OUTCOMES,
    MAX_BUTTONS,
    PROPERTY_OPS,
    REPLY_EVENT,
    Definition,
    DefinitionError,
)
from journeys.models import InstanceState, Journey, JourneyInstance, JourneyVersion
from journeys.running import definition_of
from journeys.versions import (
    JourneyStateError,
    definition_check,
    journey_create,
    journey_describe,
    journey_edit,
)
from whatsblast.admin.campaign_variants import AccountTaggedSelect
from whatsblast.admin.journeys_text import step_text
from whatsblast.auth.time_zone import zone_choices

# Segments and templates the builder offers (by name); more are typed in the JSON.
MAX_CHOICES = 500


def definition_text(definition: Any) -> str:
    """A definition as the JSON box shows it: indented, accents as they are."""
    return json.dumps(definition, indent=2, ensure_ascii=False)


class DefinitionField(forms.Field):
    """The definition as JSON text in a textarea; cleaned to the parsed JSON (any shape:
    what it means is the services' to check)."""

    widget = forms.Textarea(
        attrs={"rows": 24, "cols": 80, "class": "wb-definition-json", "spellcheck": "false"}
    )

    def prepare_value(self, value: Any) -> str:
        if isinstance(value, str):  # as typed (a form sent back with its problems)
            return value
        return "" if value is None else definition_text(value)

    def to_python(self, value: Any) -> Any:
        if value in self.empty_values:
            raise ValidationError("The journey's definition is empty.", code="required")
        try:
            return json.loads(value)
        except ValueError as exc:
            raise ValidationError(f"The definition is not JSON: {exc}.", code="json") from exc


class JourneyForm(forms.Form):
    name = forms.CharField(max_length=200, widget=forms.TextInput(attrs={"size": 50}))
    phone_number = forms.ModelChoiceField(
        queryset=PhoneNumber.objects.select_related("account").order_by("display_phone_number"),
        label="Send from",
        widget=AccountTaggedSelect,
        help_text="The number its messages come from; its account's templates can be sent. "
        "A journey keeps its number.",
    )
    description = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 2, "cols": 80})
    )
    note = forms.CharField(
        required=False,
        max_length=500,
        label="What changed",
        widget=forms.TextInput(attrs={"size": 60}),
        help_text="Kept with the version, in the journey's list of versions.",
    )
    definition = DefinitionField(label="Definition (JSON)")

    def __init__(self, *args: Any, journey: Journey | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.journey = journey
        if journey is not None:
            self.fields["phone_number"].disabled = True
            self.fields["phone_number"].required = False
        else:
            del self.fields["note"]

    def clean_name(self) -> str:
        name = str(self.cleaned_data.get("name") or "").strip()
        taken = Journey.objects.filter(name=name)
        if self.journey is not None:
            taken = taken.exclude(pk=self.journey.pk)
        if taken.exists():
            raise ValidationError(f"A journey is already named {name!r}.")
        return name

    def number(self) -> PhoneNumber | None:
        if self.journey is not None:
            return self.journey.phone_number
        number = self.cleaned_data.get("phone_number")
        return number if isinstance(number, PhoneNumber) else None


# --- what the builder offers ----------------------------------------------------------------


def _template_option(template: Template) -> dict[str, Any]:
    slots = [
        {
            "path": slot["path"],
            "label": slot["label"],
            "kind": slot["kind"],
            "required": slot["required"],
            "example": slot["example"] if isinstance(slot["example"], str) else "",
        }
        for slot in template_param_slots(template)
    ]
    return {
        "account": template.account_id,
        "name": template.name,
        "language": template.language,
        "status": template.status,
        "category": template.category,
        "unusable": template_unusable_reasons(template),
        "slots": slots,
    }


def builder_options(*, account_id: int | None = None) -> dict[str, Any]:
    """What the builder offers: templates (with the parameters each takes), segments,
    contact fields, operators and outcomes, zones; only the account's templates when a
    journey's number is fixed."""
    templates = Template.objects.order_by("name", "language")
    if account_id is not None:
        templates = templates.filter(account_id=account_id)
    segments = Segment.objects.order_by("name").values_list("pk", "name")[:MAX_CHOICES]
    return {
        "account": account_id,
        "templates": [_template_option(t) for t in templates[:MAX_CHOICES]],
        "segments": [{"id": pk, "name": name} for pk, name in segments],
        "fields": ["name", "phone", *attribute_keys()],
        "contact_fields": [{"name": name, "ops": list(FIELD_OPS[name])} for name in CONTACT_FIELDS],
        "ops": list(OPS),
        "property_ops": list(PROPERTY_OPS),
        "outcomes": list(LAST_MESSAGE_OUTCOMES),
        "reply_event": REPLY_EVENT,
        "max_buttons": MAX_BUTTONS,
        "zones": zone_choices(),
    }


# --- checking and saving --------------------------------------------------------------------


@dataclass
class NewVersion:
    """What saving a journey that has been live does, for the page to ask first."""

    number: int
    waiting: int
    # (step, people waiting there) for steps the new version keeps and for removed ones.
    kept: list[tuple[str, int]] = field(default_factory=list)
    removed: list[tuple[str, int]] = field(default_factory=list)

    @property
    def leaving(self) -> int:
        return sum(n for _, n in self.removed)


@dataclass
class Outcome:
    journey: Journey | None = None
    problems: dict[str, str] = field(default_factory=dict)
    new_version: NewVersion | None = None
    version: JourneyVersion | None = None


def problems_of(form: JourneyForm) -> dict[str, str]:
    """A bound form's own errors as problems by path (the definition's JSON, its name)."""
    return {
        ("definition" if name == "definition" else name): " ".join(str(e) for e in errors)
        for name, errors in form.errors.items()
    }


def definition_problems(number: PhoneNumber, data: Any) -> tuple[Definition | None, dict[str, str]]:
    """The checked definition, or every problem by path."""
    try:
        return definition_check(number, data), {}
    except DefinitionError as exc:
        return None, dict(exc.problems)


def new_version_notice(journey: Journey, definition: Definition) -> NewVersion:
    waiting = dict(
        JourneyInstance.objects.filter(journey=journey, state=InstanceState.ACTIVE)
        .values_list("step")
        .annotate(n=Count("id"))
        .values_list("step", "n")
    )
    keep = set(definition.step_ids())
    return NewVersion(
        number=journey.version + 1,
        waiting=sum(waiting.values()),
        kept=sorted((s, n) for s, n in waiting.items() if s in keep),
        removed=sorted((s, n) for s, n in waiting.items() if s not in keep),
    )


def journey_save(request: HttpRequest, form: JourneyForm, *, confirmed: bool) -> Outcome:
    """Create the journey, or change it (its name, description and definition): nothing
    is saved unless all of it can be; a journey that has been live is changed only once
    the new version is ``confirmed``."""
    if not form.is_valid():
        # Every problem at once: the definition's too, when it was read and has a number.
        problems = problems_of(form)
        number = form.number()
        if "definition" not in form.errors and number is not None:
            problems.update(definition_problems(number, form.cleaned_data["definition"])[1])
        return Outcome(problems=problems)
    data = form.cleaned_data
    number = form.number()
    assert number is not None
    journey = form.journey
    if journey is None:
        try:
            created = journey_create(
                name=data["name"],
                phone_number=number,
                definition=data["definition"],
                description=data["description"],
                created_by=request.user,
            )
        except DefinitionError as exc:
            return Outcome(problems=dict(exc.problems))
        return Outcome(journey=created)
    stored = JourneyVersion.objects.get(journey=journey, number=journey.version).definition
    changed = data["definition"] != stored
    if changed:
        checked, problems = definition_problems(number, data["definition"])
        if checked is None:
            return Outcome(problems=problems)
        if journey.live_since is not None and not confirmed:
            return Outcome(journey=journey, new_version=new_version_notice(journey, checked))
    try:
        with transaction.atomic():
            version = None
            if changed:
                version = journey_edit(
                    journey=journey,
                    definition=data["definition"],
                    note=data.get("note", ""),
                    edited_by=request.user,
                )
            journey_describe(journey=journey, name=data["name"], description=data["description"])
    except DefinitionError as exc:
        return Outcome(problems=dict(exc.problems))
    except JourneyStateError as exc:
        return Outcome(problems={"definition": str(exc)})
    return Outcome(journey=journey, version=version)


def check_answer(number: PhoneNumber | None, raw: str) -> tuple[dict[str, Any], int]:
    """``check/``'s answer for a definition typed or built: the steps in words, or every
    problem by path (a 400)."""
    if number is None:
        return {"problems": {"phone_number": "Choose the number it sends from."}}, 400
    try:
        data = json.loads(raw)
    except ValueError as exc:
        return {"problems": {"definition": f"The definition is not JSON: {exc}."}}, 400
    checked, problems = definition_problems(number, data)
    if checked is None:
        return {"problems": problems}, 400
    return {
        "problems": {},
        "steps": [{"id": s.id, "type": s.type, "text": step_text(s)} for s in checked.steps],
    }, 200


def current_definition(journey: Journey) -> Any:
    return JourneyVersion.objects.get(journey=journey, number=journey.version).definition


def current_parsed(journey: Journey) -> Definition:
    return definition_of(journey.pk, journey.version)
