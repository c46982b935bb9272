"""API errors: every 4xx/5xx is a JSON body ``{"error": {"status", "code", "message"}}``."""

from __future__ import annotations


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, *, headers: dict | None = None, details=None):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.headers = headers or {}
        self.details = details

    def body(self) -> dict:
        err = {"status": self.status, "code": self.code, "message": self.message}
        if self.details is not None:
            err["details"] = self.details
        return {"error": err}
