"""CEL expressions of CRD ``x-kubernetes-validations``, compiled and evaluated with ``cel-python``.

Upstream evaluates rules with cel-go plus the Kubernetes CEL libraries
(``k8s.io/apiserver/pkg/cel/library``: lists, regex, url, quantity, ip/cidr, format, ...;
https://kubernetes.io/docs/reference/using-api/cel/). Here:

- the standard CEL language is ``cel-python`` (``celpy``): ``has()``, ``size()``, ``all``/``exists``/
  ``exists_one``/``map``/``filter``, ``in``, string ``contains``/``startsWith``/``endsWith``/``matches``,
  conversions, ``duration``/``timestamp``;
- none of the Kubernetes library functions is provided, because none of the bundled CRDs
  (``sim/crds/``) uses one; a rule calling a function outside the supported set fails to compile with
  :class:`UnsupportedCel` naming the function, instead of being silently skipped;
- the optional syntax (``self.?field``, ``optional.of``) is not parsed by ``cel-python`` (a compile
  error naming the position), so ``optionalOldSelf`` rules cannot be expressed.

Values are converted guided by the structural schema: ``number`` fields are doubles even when the JSON
holds an integer (upstream's schema-typed values), ``integer`` fields ints. Programs are cached per
expression text for the process.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

import celpy
import lark
from celpy import celtypes
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError, base_functions

# Macros are parsed as calls by cel-python; they are part of standard CEL.
_MACROS = frozenset({"has", "all", "exists", "exists_one", "map", "filter", "dyn"})
SUPPORTED_FUNCTIONS = frozenset(name for name in base_functions if name[0].isalpha()) | _MACROS
_NO_SUCH_MEMBER = re.compile(r"no such member in mapping: '([^']*)'")


class UnsupportedCel(ValueError):
    """An expression this emulator cannot compile (syntax cel-python lacks, or an unknown function)."""


@dataclass(frozen=True)
class Program:
    """A compiled expression: ``uses_old_self`` marks a transition rule (upstream ``UsesOldSelf``)."""

    text: str
    runner: Any
    uses_old_self: bool


class EvaluationError(Exception):
    """A runtime error (``no such key: x``, no matching overload, ...), worded as cel-go's."""


_ENVIRONMENT = celpy.Environment()


@functools.lru_cache(maxsize=4096)
def compile_expression(text: str) -> Program:
    """Compile ``text``; raises :class:`UnsupportedCel` with the reason (the CRD would be rejected)."""
    try:
        tree = _ENVIRONMENT.compile(text)
    except CELParseError as error:
        raise UnsupportedCel(f"compilation failed: {' '.join(str(error).split())}") from error
    functions: set[str] = set()
    identifiers: set[str] = set()
    for node in tree.iter_subtrees():
        if node.data == "ident_arg":
            functions.add(str(node.children[0]))
        elif node.data == "member_dot_arg":
            functions.add(str(node.children[1]))
        elif node.data == "ident":
            identifiers.add(str(node.children[0]))
    unsupported = sorted(functions - SUPPORTED_FUNCTIONS)
    if unsupported:
        raise UnsupportedCel(
            f"compilation failed: undeclared reference to {unsupported[0]!r}: the emulator's CEL (cel-python) "
            "has the standard CEL functions only, not the Kubernetes CEL libraries"
        )
    return Program(text, _ENVIRONMENT.program(tree), "oldSelf" in identifiers)


def evaluate(program: Program, variables: dict[str, Any]) -> Any:
    """The expression's value (a ``celtypes`` value); raises :class:`EvaluationError`."""
    try:
        result = program.runner.evaluate(variables)
    except CELEvalError as error:
        raise EvaluationError(_describe(error)) from error
    except (lark.exceptions.LarkError, TypeError, ValueError, KeyError, ZeroDivisionError) as error:
        raise EvaluationError(str(error)) from error
    if isinstance(result, CELEvalError):
        raise EvaluationError(_describe(result))
    return result


def _describe(error: CELEvalError) -> str:
    text = str(error.args[0]) if error.args else str(error)
    missing = _NO_SUCH_MEMBER.fullmatch(text)
    if missing:
        return f"no such key: {missing.group(1)}"
    if text.startswith("found no matching overload") or "no such overload" in text:
        return "no such overload"
    return text


def to_cel(value: Any, schema: dict[str, Any] | None) -> Any:
    """A JSON value as a CEL value, typed by its structural schema where the JSON is ambiguous."""
    schema = schema or {}
    if value is None:
        return None
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        return celtypes.DoubleType(value) if schema.get("type") == "number" else celtypes.IntType(value)
    if isinstance(value, float):
        return celtypes.DoubleType(value)
    if isinstance(value, str):
        return celtypes.StringType(value)
    if isinstance(value, list):
        items = schema.get("items") if isinstance(schema.get("items"), dict) else None
        return celtypes.ListType([to_cel(item, items) for item in value])
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        converted = {}
        for key, item in value.items():
            sub = properties.get(key) if key in properties else additional if isinstance(additional, dict) else None
            converted[celtypes.StringType(key)] = to_cel(item, sub)
        return celtypes.MapType(converted)
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def is_true(result: Any) -> bool:
    return isinstance(result, celtypes.BoolType) and bool(result)


def as_message(result: Any) -> str | None:
    """A ``messageExpression`` result usable as a message (upstream: a non-blank, one-line string)."""
    if not isinstance(result, str):  # cel-python may answer a plain str for a concatenation
        return None
    text = str(result)
    return text if text.strip() and "\n" not in text else None
