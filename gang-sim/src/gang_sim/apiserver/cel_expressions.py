"""CEL expressions of CRD ``x-kubernetes-validations``, compiled and evaluated with the
``common-expression-language`` package (import ``cel``, Python bindings of the Rust ``cel``
interpreter).

Upstream evaluates rules with cel-go plus the Kubernetes CEL libraries
(``k8s.io/apiserver/pkg/cel/library``: lists, regex, url, quantity, ip/cidr, format, ...;
https://kubernetes.io/docs/reference/using-api/cel/). Here:

- standard CEL: ``has()``, ``size()``, the ``all``/``exists``/``exists_one``/``map``/``filter`` macros,
  ``in``, string ``contains``/``startsWith``/``endsWith``/``matches``, conversions, ``duration``/
  ``timestamp`` and their accessors;
- none of the Kubernetes library functions is provided, because none of the bundled CRDs
  (``gang_sim/apiserver/crds/``) uses one; a rule calling a function outside :data:`SUPPORTED_FUNCTIONS` fails to
  compile with :class:`UnsupportedCel` naming it, instead of being skipped;
- the optional syntax (``self.?field``, ``optionalOldSelf``) is not parsed (a compile error naming the
  position).

Values are converted guided by the structural schema: ``number`` fields are doubles even when the JSON
holds an integer (upstream's schema-typed values). Programs are cached per expression text.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

try:
    import cel
except ModuleNotFoundError as missing:  # the provider installs without it; only the emulator needs it
    raise ModuleNotFoundError(
        "the emulator needs the sim extra: pip install 'airflow-provider-gang[sim]' (common-expression-language)"
    ) from missing

SUPPORTED_FUNCTIONS = frozenset(
    {
        "size", "contains", "startsWith", "endsWith", "matches", "string", "int", "uint", "double", "bytes",
        "bool", "timestamp", "duration", "type", "dyn", "getDate", "getDayOfMonth", "getDayOfWeek",
        "getDayOfYear", "getFullYear", "getHours", "getMilliseconds", "getMinutes", "getMonth", "getSeconds",
    }
)  # fmt: skip


class UnsupportedCel(ValueError):
    """An expression this emulator cannot compile (a syntax error, optional syntax, an unknown function)."""


class EvaluationError(Exception):
    """A runtime error (``no such key: x``, ``no such overload``, ...), worded as cel-go's."""


@dataclass(frozen=True)
class Program:
    """A compiled expression: ``uses_old_self`` marks a transition rule (upstream ``UsesOldSelf``)."""

    text: str
    runner: Any
    uses_old_self: bool


@functools.lru_cache(maxsize=4096)
def compile_expression(text: str) -> Program:
    """Compile ``text``; raises :class:`UnsupportedCel` with the reason (the CRD would be rejected)."""
    try:
        program = cel.compile(text)
    except (ValueError, RuntimeError) as error:
        raise UnsupportedCel(f"compilation failed: {' '.join(str(error).split())}") from error
    references = program.references()
    functions = {name for name in references["functions"] if name[0].isalpha()}
    unsupported = sorted(functions - SUPPORTED_FUNCTIONS)
    if unsupported:
        raise UnsupportedCel(
            f"compilation failed: undeclared reference to {unsupported[0]!r}: the emulator's CEL has the "
            "standard CEL functions only, not the Kubernetes CEL libraries"
        )
    return Program(text, program, "oldSelf" in references["variables"])


def evaluate(program: Program, variables: dict[str, Any]) -> Any:
    """The expression's value (plain Python values); raises :class:`EvaluationError`."""
    try:
        return program.runner.execute(variables)
    except KeyError as error:
        raise EvaluationError(f"no such key: {error.args[0] if error.args else ''}") from error
    except TypeError as error:
        raise EvaluationError(f"no such overload: {error}") from error
    except (ValueError, RuntimeError, ZeroDivisionError, OverflowError) as error:
        raise EvaluationError(str(error)) from error


def to_cel(value: Any, schema: dict[str, Any] | None) -> Any:
    """A JSON value as the rule sees it, typed by its structural schema where the JSON is ambiguous."""
    schema = schema or {}
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return float(value) if schema.get("type") == "number" else value
    if isinstance(value, list):
        items = schema.get("items") if isinstance(schema.get("items"), dict) else None
        return [to_cel(item, items) for item in value]
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        converted = {}
        for key, item in value.items():
            sub = properties.get(key) if key in properties else additional if isinstance(additional, dict) else None
            converted[key] = to_cel(item, sub)
        return converted
    return value


def is_true(result: Any) -> bool:
    return result is True


def as_message(result: Any) -> str | None:
    """A ``messageExpression`` result usable as a message (upstream: a non-blank, one-line string)."""
    if not isinstance(result, str):
        return None
    return result if result.strip() and "\n" not in result else None
