"""The API's one error shape: ``{"error": {"code", "message", "fields"}}``."""

from __future__ import annotations

from django.http import JsonResponse


class ApiProblem(Exception):
    """A request the API refuses, with the HTTP status and a stable machine-readable code."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        fields: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.fields = fields or {}
        self.headers = headers or {}

    def response(self) -> JsonResponse:
        body = {"error": {"code": self.code, "message": self.message, "fields": self.fields}}
        response = JsonResponse(body, status=self.status)
        for name, value in self.headers.items():
            response[name] = value
        return response


def invalid_fields(fields: dict[str, str]) -> ApiProblem:
    count = len(fields)
    return ApiProblem(
        400,
        "invalid_request",
        f"{count} field{'s' if count != 1 else ''} failed validation; see fields.",
        fields=fields,
    )
