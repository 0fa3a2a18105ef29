"""Validation errors with the location a person needs to fix them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FieldError:
    """One problem in one object: ``path`` is dotted with list indexes, e.g. ``spec.template.spec.requirements[2].operator``."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


@dataclass(frozen=True)
class ValidationIssue:
    """A :class:`FieldError` placed in a file: ``FILE:DOC_INDEX: Kind/name: field.path: message``.

    ``doc_index`` counts YAML documents in the file from 0.  ``line`` (added; 0 when unknown) is the 1-based
    line of the field in the file, or of the document's first line; ``str()`` leaves it out (scripts parse it).
    """

    file: str
    doc_index: int
    kind: str
    name: str
    path: str
    message: str
    line: int = 0

    def __str__(self) -> str:
        where = f"{self.file}:{self.doc_index}"
        obj = f"{self.kind or '?'}/{self.name or '?'}"
        field = f"{self.path}: " if self.path else ""
        return f"{where}: {obj}: {field}{self.message}"

    def to_dict(self) -> dict:
        return {
            "file": self.file,
            "docIndex": self.doc_index,
            "kind": self.kind,
            "name": self.name,
            "path": self.path,
            "message": self.message,
            "line": self.line,
        }


class ManifestError(ValueError):
    """Raised when manifests do not load or validate; carries every issue found, not only the first."""

    def __init__(self, issues: list[ValidationIssue]):
        self.issues = list(issues)
        super().__init__("\n".join(str(i) for i in self.issues) or "invalid manifest")
