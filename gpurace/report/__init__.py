"""Report formatters: compiler-style text, JSON and SARIF, carrying the same facts."""

from .json_report import SCHEMA_VERSION, dumps, to_json, write_json
from .sarif import to_sarif, write_sarif
from .suppress import Suppressions
from .suppress import load as load_suppressions
from .text import format_text, print_text

__all__ = [
    "SCHEMA_VERSION",
    "Suppressions",
    "dumps",
    "format_text",
    "load_suppressions",
    "print_text",
    "to_json",
    "to_sarif",
    "write_json",
    "write_sarif",
]
