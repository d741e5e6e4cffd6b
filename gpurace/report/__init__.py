"""Report formatters: compiler-style text and JSON, carrying the same facts."""

from .json_report import SCHEMA_VERSION, dumps, to_json, write_json
from .text import format_text, print_text

__all__ = ["SCHEMA_VERSION", "dumps", "format_text", "print_text", "to_json", "write_json"]
