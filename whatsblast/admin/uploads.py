"""Contact uploads in the admin: the upload form on a list, the column choice, the live
progress and the result with its rejected rows.

The file streams to disk as it arrives (``ContactFileUploadHandler``); each page below asks
``campaigns.audience.uploads`` to do the work, and the import itself runs as a job, so no request
lasts longer than reading the upload and its first rows.
"""

from __future__ import annotations

import functools
import uuid
from pathlib import Path
from typing import Any, cast

import phonenumbers
from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.files.uploadedfile import UploadedFile
from django.core.files.uploadhandler import FileUploadHandler, StopUpload
from django.db import transaction
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.http import urlencode
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from phonenumbers import geocoder

from campaigns.audience.rows import ImportFileError
from campaigns.audience.uploads import (
    LISTED_REJECTIONS,
    contact_list_create,
    contact_upload_create,
    contact_upload_preview,
    contact_upload_progress,
    contact_upload_queue,
    contact_upload_rejects_path,
    stored_suffix,
    upload_dir,
)
from campaigns.models import ContactList, ContactUpload, ContactUploadStatus, DuplicatePolicy

UPLOAD_FIELD = "file"


class StoredUploadFile(UploadedFile[bytes]):
    """An upload already written to its final place under CONTACT_UPLOAD_DIR."""

    def __init__(self, stored_path: Path, *, name: str, size: int, content_type: str) -> None:
        super().__init__(stored_path.open("rb"), name, content_type, size)
        self.stored_path = stored_path


class ContactFileUploadHandler(FileUploadHandler):
    """Write the one contact file straight to CONTACT_UPLOAD_DIR, chunk by chunk.

    Nothing of it is held in memory, and nothing past ``max_bytes`` is kept: the partial
    file is deleted and the rest of the request read and dropped, so the page can answer
    with a message instead of a broken connection.
    """

    def __init__(self, request: HttpRequest, *, max_bytes: int) -> None:
        super().__init__(request)
        self.max_bytes = max_bytes
        self.too_large = False
        self.stored_path: Path | None = None
        self._file: Any = None
        self._size = 0

    def new_file(self, field_name: str, file_name: str, *args: Any, **kwargs: Any) -> None:
        super().new_file(field_name, file_name, *args, **kwargs)
        if field_name != UPLOAD_FIELD or self.stored_path is not None:
            raise StopUpload(connection_reset=False)  # one file, in the one field
        self.stored_path = upload_dir() / f"{uuid.uuid4().hex}{stored_suffix(file_name)}"
        self._file = self.stored_path.open("wb")

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes | None:
        self._size += len(raw_data)
        if self._size > self.max_bytes:
            self.too_large = True
            self._discard()
            raise StopUpload(connection_reset=False)
        self._file.write(raw_data)
        return None

    def file_complete(self, file_size: int) -> StoredUploadFile | None:
        if self._file is None or self.stored_path is None:
            return None
        self._file.close()
        self._file = None
        return StoredUploadFile(
            self.stored_path,
            name=self.file_name or "upload",
            size=file_size,
            content_type=self.content_type or "application/octet-stream",
        )

    def upload_interrupted(self) -> None:
        self._discard()

    def _discard(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        if self.stored_path is not None:
            self.stored_path.unlink(missing_ok=True)


def _country_name(region: str) -> str:
    example = phonenumbers.example_number(region)
    name = geocoder.country_name_for_number(example, "en") if example is not None else ""
    return name or region


@functools.cache
def _region_choices() -> list[tuple[str, str]]:
    """Countries by name ("Brazil (BR, +55)"), in alphabetical order of the name; the
    browser's type-ahead on a select finds one by its first letters. Built once per
    process (naming 245 regions takes a quarter of a second)."""
    named = sorted(
        (
            _country_name(r),
            r,
            phonenumbers.country_code_for_region(r),
        )
        for r in phonenumbers.SUPPORTED_REGIONS
    )
    return [("", "— none: every number has its +country code —")] + [
        (region, f"{name} ({region}, +{code})") for name, region, code in named
    ]


# What a person calls the encodings a file is read in.
ENCODING_LABELS = {
    "utf-8-sig": "UTF-8",
    "utf-8": "UTF-8",
    "cp1252": "Windows (Excel, Western European)",
    "latin-1": "Latin-1 (ISO 8859-1)",
}


def encoding_label(encoding: str) -> str:
    return ENCODING_LABELS.get(encoding.lower(), encoding) if encoding else ""


class MappingForm(forms.Form):
    phone_column = forms.ChoiceField(label="Phone column")
    name_column = forms.ChoiceField(label="Name column", required=False)
    region = forms.ChoiceField(
        label="Default country",
        required=False,
        help_text="Numbers written without +country are read as numbers of this country.",
    )
    attribute_columns = forms.MultipleChoiceField(
        label="Other columns to keep on each contact",
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Kept as contact attributes: campaign params can use them.",
    )
    duplicate_policy = forms.ChoiceField(
        label="A number on several rows",
        choices=DuplicatePolicy.choices,
        initial=DuplicatePolicy.LAST,
        required=False,  # not sent: last row wins, as before there was a choice
        widget=forms.RadioSelect,
        help_text="Anywhere in the file. Last row wins: the later rows' filled-in cells "
        "update the earlier ones. First row wins: the later rows are ignored. Reject: none "
        "of the rows is imported; all go to the rejected-rows file to be fixed and "
        "uploaded again. Every repeated row is listed on the result page.",
    )

    def __init__(
        self,
        *args: Any,
        headers: list[str],
        has_header: bool,
        other_columns: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        columns = [(h, h) for h in headers]
        choice = cast(dict[str, forms.ChoiceField], self.fields)
        choice["phone_column"].choices = columns
        choice["name_column"].choices = [("", "— none —"), *columns]
        choice["region"].choices = _region_choices()
        # Never a rejects file's own columns (line, value, reason...): they are not the
        # contacts'.
        kept = headers if other_columns is None else [h for h in headers if h in other_columns]
        choice["attribute_columns"].choices = [(h, h) for h in kept]
        if not has_header:
            # A file without a header row: the import finds the phone column itself.
            self.fields["phone_column"].disabled = True


@admin.register(ContactUpload)
class ContactUploadAdmin(admin.ModelAdmin[ContactUpload]):
    list_display = (
        "id",
        "original_name",
        "contact_list",
        "status",
        "rows_read",
        "imported",
        "merged",
        "rejected",
        "created_by",
        "created_at",
    )
    list_filter = ("status",)
    search_fields = ("original_name", "contact_list__name")
    list_select_related = ("contact_list", "created_by")
    ordering = ("-created_at",)
    show_full_result_count = False

    @admin.display(description="imported")
    def imported(self, obj: ContactUpload) -> Any:
        return obj.result.get("imported", "")

    @admin.display(description="merged")
    def merged(self, obj: ContactUpload) -> Any:
        return obj.result.get("merged", "")

    @admin.display(description="rejected")
    def rejected(self, obj: ContactUpload) -> Any:
        return obj.result.get("rejected", "")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # uploads start from a contact list's page

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        extra = {**(extra_context or {}), "can_upload": can_upload(request)}
        return super().changelist_view(request, extra)

    def start_view(self, request: HttpRequest) -> HttpResponse:
        """Upload contacts in one place: into a list chosen here, or a new one named here;
        then the file page of that list."""
        if not can_upload(request):
            raise PermissionDenied
        form = UploadStartForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            chosen = form.cleaned_data["contact_list"]
            if chosen is None:
                if not request.user.has_perm("campaigns.add_contactlist"):
                    raise PermissionDenied
                # The list is created only once a file is submitted into it (the next page).
                new_url = reverse("admin:campaigns_contactupload_new_list")
                return redirect(f"{new_url}?{urlencode({'name': form.cleaned_data['new_list']})}")
            return redirect("admin:campaigns_contactlist_upload", object_id=chosen.pk)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "Upload contacts",
            "form": form,
        }
        return TemplateResponse(request, "admin/campaigns/contactupload/start.html", context)

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view
        return [
            path("start/", view(self.start_view), name="campaigns_contactupload_start"),
            path("start/new/", view(new_list_upload), name="campaigns_contactupload_new_list"),
            path("<int:upload_id>/map/", view(self.map_view), name="campaigns_contactupload_map"),
            path(
                "<int:upload_id>/progress/",
                view(self.progress_view),
                name="campaigns_contactupload_progress",
            ),
            path(
                "<int:upload_id>/rejects.csv",
                view(self.rejects_view),
                name="campaigns_contactupload_rejects",
            ),
            *super().get_urls(),
        ]

    def _get(self, request: HttpRequest, upload_id: int, *, add: bool = False) -> ContactUpload:
        if not self.has_view_permission(request) or (add and not can_upload(request)):
            raise PermissionDenied
        return get_object_or_404(ContactUpload.objects.select_related("contact_list"), pk=upload_id)

    # The status page: progress while it runs, the result once it is done.
    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        if not object_id.isdigit():
            raise Http404
        upload = self._get(request, int(object_id))
        if upload.status == ContactUploadStatus.MAPPING and can_upload(request):
            return redirect("admin:campaigns_contactupload_map", upload.pk)
        result = upload.result or {}
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": f"Upload of {upload.original_name}",
            "upload": upload,
            "progress": contact_upload_progress(upload=upload),
            "result": result,
            # 100,000 rather than 100000: read at a glance.
            "counts": {k: f"{v:,}" for k, v in result.items() if isinstance(v, int)},
            "rejections": result.get("rejections", [])[:LISTED_REJECTIONS],
            "repeats": result.get("repeats", [])[:LISTED_REJECTIONS],
            "changed_elsewhere": changed_elsewhere_text(result),
            "has_rejects_file": contact_upload_rejects_path(upload=upload) is not None,
            "can_remap": upload.status == ContactUploadStatus.FAILED and can_upload(request),
            "list_url": reverse(
                "admin:campaigns_contactlist_change", args=[upload.contact_list_id]
            ),
        }
        return TemplateResponse(request, "admin/campaigns/contactupload/status.html", context)

    def progress_view(self, request: HttpRequest, upload_id: int) -> JsonResponse:
        upload = self._get(request, upload_id)
        return JsonResponse(contact_upload_progress(upload=upload))

    def rejects_view(self, request: HttpRequest, upload_id: int) -> FileResponse:
        upload = self._get(request, upload_id)
        rejects = contact_upload_rejects_path(upload=upload)
        if rejects is None:
            raise Http404("no rejected rows")
        name = f"{Path(upload.original_name).stem}-rejected.csv"
        return FileResponse(
            rejects.open("rb"), as_attachment=True, filename=name, content_type="text/csv"
        )

    def map_view(self, request: HttpRequest, upload_id: int) -> HttpResponse:
        upload = self._get(request, upload_id, add=True)
        status_url = reverse("admin:campaigns_contactupload_change", args=[upload.pk])
        if upload.status not in (ContactUploadStatus.MAPPING, ContactUploadStatus.FAILED):
            return redirect(status_url)
        try:
            preview = contact_upload_preview(upload=upload)
        except ImportFileError as exc:
            self.message_user(request, f"The file cannot be read: {exc}", messages.ERROR)
            return redirect(status_url)
        initial = {
            "phone_column": upload.phone_column,
            "name_column": upload.name_column,
            "region": upload.region,
            "attribute_columns": upload.attribute_columns,
            "duplicate_policy": upload.duplicate_policy,
        }
        form = MappingForm(
            request.POST if request.method == "POST" else None,
            initial=initial,
            headers=preview.headers,
            has_header=preview.has_header,
            other_columns=preview.other_columns
            + [c for c in (upload.phone_column, upload.name_column) if c],
        )
        if form.is_bound and form.is_valid():
            data = form.cleaned_data
            try:
                contact_upload_queue(
                    upload=upload,
                    phone_column=data["phone_column"] or "",
                    name_column=data["name_column"] or "",
                    region=data["region"] or "",
                    attribute_columns=list(data["attribute_columns"]),
                    duplicate_policy=data["duplicate_policy"] or DuplicatePolicy.LAST,
                )
            except ValidationError as exc:
                _form_errors(form, exc)
            else:
                return redirect(status_url)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": f"Choose the columns of {upload.original_name}",
            "upload": upload,
            "preview": preview,
            "encoding_label": encoding_label(getattr(preview, "encoding", "") or ""),
            "form": form,
            "list_url": reverse(
                "admin:campaigns_contactlist_change", args=[upload.contact_list_id]
            ),
        }
        return TemplateResponse(request, "admin/campaigns/contactupload/map.html", context)


def changed_elsewhere_text(result: dict[str, Any]) -> str:
    """ "3 contacts in other lists were updated: +5511…, in list 'VIP'; …", or ''."""
    count = int(result.get("changed_elsewhere") or 0)
    if not count:
        return ""
    named = []
    for item in result.get("changed_elsewhere_listed", []):
        lists = [f"'{name}'" for name in item["lists"]]
        where = f"list {lists[0]}" if len(lists) == 1 else f"lists {', '.join(lists)}"
        named.append(f"{item['phone']}, in {where}")
    more = count - len(named)
    tail = f"; and {more:,} more" if more > 0 else ""
    noun = "contact in another list was" if count == 1 else "contacts in other lists were"
    return f"{count:,} {noun} updated (name or columns): {'; '.join(named)}{tail}."


def _form_errors(form: forms.Form, exc: ValidationError) -> None:
    if hasattr(exc, "error_dict"):
        for field, errors in exc.message_dict.items():
            form.add_error(field if field in form.fields else None, errors)
    else:
        form.add_error(None, exc.messages)


def can_upload(request: HttpRequest) -> bool:
    return bool(request.user.has_perm("campaigns.add_contactupload"))


class UploadStartForm(forms.Form):
    contact_list = forms.ModelChoiceField(
        queryset=ContactList.objects.order_by("name"),
        required=False,
        label="Into the list",
        empty_label="— a new list —",
    )
    new_list = forms.CharField(
        required=False,
        max_length=200,
        label="New list's name",
        help_text="Only when you add a new list.",
    )

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or {}
        name = (cleaned.get("new_list") or "").strip()
        if cleaned.get("contact_list") is None:
            if not name:
                self.add_error("new_list", "Choose a list or name a new one.")
            elif ContactList.objects.filter(name=name).exists():
                self.add_error("new_list", f"There is a list called {name!r}: choose it above.")
        cleaned["new_list"] = name
        return cleaned


class UploadForm(forms.Form):
    file = forms.FileField(
        label="Contact file",
        help_text="CSV (UTF-8 or Excel's Windows encoding) or XLSX, up to a million rows.",
        widget=forms.ClearableFileInput(attrs={"accept": ".csv,.txt,.tsv,.xlsx"}),
    )


def contact_list_upload_view(request: HttpRequest, list_admin: Any, object_id: int) -> HttpResponse:
    """The upload form of a contact list.

    Django reads the request body when anything first touches ``request.POST``, the CSRF
    check included, so the handler that streams the file to disk must be installed before
    the CSRF check runs: the URL is exempt from the middleware's check
    (``ContactListAdmin.get_urls``) and the view applies it itself right after.
    """
    if not (list_admin.has_view_permission(request) and can_upload(request)):
        raise PermissionDenied
    handler = ContactFileUploadHandler(request, max_bytes=settings.CONTACT_UPLOAD_MAX_BYTES)
    request.upload_handlers = [handler]
    contact_list = get_object_or_404(ContactList, pk=object_id)
    return csrf_protect(_upload)(request, list_admin, handler, contact_list, "")


@csrf_exempt  # applied by the view itself once its upload handler is in (as above)
def new_list_upload(request: HttpRequest) -> HttpResponse:
    """The upload form of a list named on the start page and not created yet: the list is
    created with the upload, once a file is submitted and accepted, never before."""
    list_admin = admin.site.get_model_admin(ContactList)
    if not (
        list_admin.has_view_permission(request)
        and can_upload(request)
        and request.user.has_perm("campaigns.add_contactlist")
    ):
        raise PermissionDenied
    name = (request.GET.get("name") or "").strip()
    if not name:
        return redirect("admin:campaigns_contactupload_start")
    handler = ContactFileUploadHandler(request, max_bytes=settings.CONTACT_UPLOAD_MAX_BYTES)
    request.upload_handlers = [handler]
    return csrf_protect(_upload)(request, list_admin, handler, None, name)


def _upload(
    request: HttpRequest,
    list_admin: Any,
    handler: ContactFileUploadHandler,
    contact_list: ContactList | None,
    new_list: str,
) -> HttpResponse:
    """The upload form into ``contact_list``, or into a new list called ``new_list``."""
    form = UploadForm(request.POST or None, request.FILES or None)
    if request.method == "POST":
        stored = request.FILES.get(UPLOAD_FIELD)
        valid = form.is_valid()
        if handler.too_large:
            limit = settings.CONTACT_UPLOAD_MAX_BYTES // (1024 * 1024)
            form.errors["file"] = form.error_class(
                [f"The file is larger than {limit} MB: split it in parts."]
            )
        elif valid and isinstance(stored, StoredUploadFile):
            try:
                with transaction.atomic():
                    upload = contact_upload_create(
                        contact_list=contact_list or contact_list_create(name=new_list),
                        path=stored.stored_path,
                        original_name=stored.name or "upload",
                        user=request.user,
                    )
            except ImportFileError as exc:
                form.add_error("file", f"This file cannot be imported: {exc}.")
            except ValidationError as exc:
                form.add_error("file", exc.messages)
            else:
                return redirect("admin:campaigns_contactupload_map", upload.pk)
        if isinstance(stored, StoredUploadFile):
            stored.close()
            stored.stored_path.unlink(missing_ok=True)  # refused: nothing kept
    context = {
        **list_admin.admin_site.each_context(request),
        "opts": list_admin.opts,
        "title": f"Upload contacts into {contact_list or new_list}",
        "contact_list": contact_list,
        "new_list": new_list,
        "form": form,
        "max_mb": settings.CONTACT_UPLOAD_MAX_BYTES // (1024 * 1024),
        "recent": list(
            ContactUpload.objects.filter(contact_list=contact_list)
            .select_related("created_by")
            .order_by("-created_at")[:10]
        )
        if contact_list is not None
        else [],
    }
    return TemplateResponse(request, "admin/campaigns/contactupload/upload.html", context)
