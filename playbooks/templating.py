"""``{{ }}`` variables for playbooks, through Jinja2's sandbox, plus secret masking.

Why Jinja2's SandboxedEnvironment (not eval, not a home-made parser): operators know the syntax from
Ansible (``{{ team }}-events``, ``x | default(3)``, ``when: r.changed``), and the sandbox refuses
attribute access to Python internals, so a playbook can compute values but never run code.
Undefined names are errors (StrictUndefined), never silently empty strings.

A value that is exactly one ``{{ expr }}`` keeps its native type (``read_queues: "{{ n }}"`` stays an
int); anything else renders to a string. ``env.NAME`` reads the environment; every value read that way
(and every variable whose name says it is a secret) is registered with ``Secrets`` and replaced by
``********`` wherever the runner prints or logs. ``env.NAME | default('')`` (or ``env.NAME is defined``)
makes the variable optional: an unset one is then no error, at validation or at run time.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from typing import Any

from jinja2 import (
    StrictUndefined,
    TemplateAssertionError,
    TemplateRuntimeError,
    TemplateSyntaxError,
    UndefinedError,
    meta,
    nodes,
)
from jinja2.sandbox import SandboxedEnvironment, SecurityError

from playbooks.errors import StepError

MASK = "********"
SECRET_NAME = re.compile(r"pass(word)?|secret|token|credential|private|(^|_)sk$", re.IGNORECASE)
_SINGLE = re.compile(r"^\s*\{\{(?P<expr>.*?)\}\}\s*$", re.DOTALL)
# Ansible's words (module_utils.parsing.convert_bool): what ``-e really=false`` means in a condition.
FALSE_WORDS = frozenset({"false", "no", "off", "0", "n", "f", ""})
TRUE_WORDS = frozenset({"true", "yes", "on", "1", "y", "t"})


def is_true(value: Any) -> bool:
    """A condition's truth as Ansible reads it: ``-e`` values are strings, and the string "false"
    (or no, off, 0) must be false, as ``vars: {really: false}`` is; any other value as Python does."""
    if isinstance(value, str):
        return value.strip().lower() not in FALSE_WORDS
    return bool(value)


def to_bool(value: Any) -> bool:
    """Ansible's ``| bool`` filter: true only for a true value or word (yes, on, 1, true ...)."""
    if isinstance(value, str):
        return value.strip().lower() in TRUE_WORDS
    return value is True or (isinstance(value, int | float) and value == 1)


class _Word(str):
    """A string variable inside a condition: ``not really`` and ``really and x`` read ``-e really=false``
    as false too, not only a bare ``when: really``."""

    __slots__ = ()

    def __bool__(self) -> bool:
        return is_true(str(self))


class Secrets:
    """Values that must never be printed; ``mask`` replaces them in any string or structure."""

    def __init__(self) -> None:
        self._values: set[str] = set()

    def add(self, value: object) -> None:
        text = "" if value is None else str(value)
        if len(text) >= 3:  # masking one or two characters would garble every line
            self._values.add(text)

    def mask(self, value: Any) -> Any:
        if isinstance(value, str):
            for secret in sorted(self._values, key=len, reverse=True):
                if secret in value:
                    value = value.replace(secret, MASK)
            return value
        if isinstance(value, Mapping):
            return {k: self.mask(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.mask(v) for v in value]
        return value


class EnvironmentSecrets(Mapping[str, str]):
    """What ``env`` means in a template: the process environment, each value read becomes a secret."""

    def __init__(self, secrets: Secrets, environ: Mapping[str, str] | None = None) -> None:
        self._secrets = secrets
        self._environ = os.environ if environ is None else environ

    def __getitem__(self, name: str) -> str:
        # an unset name raises KeyError: Jinja then gives an Undefined, which ``default`` replaces and
        # anything else reports through _PlaybookUndefined's message
        value = self._environ[name]
        self._secrets.add(value)
        return value

    def __getattr__(self, name: str) -> str:
        if name.startswith("_") or name not in self._environ:
            raise AttributeError(name)
        return self[name]

    def __iter__(self) -> Iterator[str]:
        return iter(())  # listing the environment would print every secret in it

    def __len__(self) -> int:
        return 0


class _PlaybookUndefined(StrictUndefined):
    """StrictUndefined whose message for an unset ``env.NAME`` says which environment variable is missing
    (Jinja's own would be "'EnvironmentSecrets object' has no attribute 'NAME'")."""

    __slots__ = ()

    @property
    def _undefined_message(self) -> str:
        if isinstance(self._undefined_obj, EnvironmentSecrets):
            name = self._undefined_name
            return f"environment variable {name} is not set (the playbook reads env.{name})"
        return super()._undefined_message


class Templater:
    """Renders values and evaluates expressions against a context of variables (sandboxed)."""

    def __init__(self) -> None:
        self.env = SandboxedEnvironment(undefined=_PlaybookUndefined, autoescape=False, keep_trailing_newline=True)
        self.env.filters["bool"] = to_bool  # `when: really | bool`, the Ansible idiom for -e values

    # -- static checks (validation, before anything runs) ------------------------------------------
    def check(self, text: str, expression: bool = False) -> str | None:
        """The syntax error of a template (or bare expression), else None. An unknown filter or test
        (``x | nosuchfilter``) is found here too: Jinja reports it only when it compiles the template
        (TemplateAssertionError), and the run would fail at that step after earlier steps changed things."""
        try:
            ast = self.env.parse(_as_template(text, expression))
        except TemplateSyntaxError as e:
            return f"template syntax error: {e.message}"
        # every filter and test, also those inside {% if %} that Jinja would look up only when it runs
        for node in ast.find_all((nodes.Filter, nodes.Test)):
            kind, known = ("filter", self.env.filters) if isinstance(node, nodes.Filter) else ("test", self.env.tests)
            if node.name not in known:
                return f"template error: no {kind} named {node.name!r}"
        try:
            self.env.compile(ast)
        except TemplateAssertionError as e:
            return f"template error: {e.message}"
        return None

    def names(self, text: str, expression: bool = False) -> tuple[set[str], set[str]]:
        """(top-level variable names, ``env.NAME`` names) a template needs; ``x | default(..)`` and
        ``x is defined`` do not need ``x``, nor ``env.X | default(..)`` the variable X."""
        ast = self.env.parse(_as_template(text, expression))
        guarded = [n.node for n in ast.find_all(nodes.Filter) if n.name in ("default", "d")]
        guarded += [n.node for n in ast.find_all(nodes.Test) if n.name in ("defined", "undefined")]
        optional = {n.name for n in guarded if isinstance(n, nodes.Name)}
        optional_env = {_env_name(n) for n in guarded} - {None}
        env_names = {_env_name(n) for n in ast.find_all((nodes.Getattr, nodes.Getitem))} - {None}
        return set(meta.find_undeclared_variables(ast)) - optional, env_names - optional_env

    # -- run time ------------------------------------------------------------------------------------
    def render(self, value: Any, context: Mapping[str, Any]) -> Any:
        """Render every string inside ``value`` (dicts and lists recursively)."""
        if isinstance(value, str):
            return self._render_text(value, context)
        if isinstance(value, Mapping):
            return {k: self.render(v, context) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.render(v, context) for v in value]
        return value

    def evaluate(self, expression: str | bool, context: Mapping[str, Any]) -> Any:
        """A bare expression (``when:``, ``until:``, ``assert:``); booleans pass through."""
        if isinstance(expression, bool):
            return expression
        text = str(expression).strip()
        m = _SINGLE.match(text)
        if m:
            text = m.group("expr")
        return self._guard(lambda: self.env.compile_expression(text, undefined_to_none=False)(**context), text)

    def condition(self, expression: str | bool, context: Mapping[str, Any]) -> bool:
        """``when:``, ``until:``, ``assert:``: true or false as Ansible reads them (see ``is_true``)."""
        words = {k: _Word(v) if type(v) is str else v for k, v in context.items()}
        return is_true(self.evaluate(expression, words))

    def _render_text(self, text: str, context: Mapping[str, Any]) -> Any:
        if "{{" not in text and "{%" not in text:
            return text
        m = _SINGLE.match(text)
        if m and "{{" not in m.group("expr") and "{%" not in text:
            expr = m.group("expr")
            return self._guard(lambda: self.env.compile_expression(expr, undefined_to_none=False)(**context), text)
        return self._guard(lambda: self.env.from_string(text).render(**context), text)

    @staticmethod
    def _guard(fn: Any, text: str) -> Any:
        try:
            return fn()
        except UndefinedError as e:
            raise StepError(f"in {text.strip()!r}: {e.message}") from None
        except SecurityError as e:
            raise StepError(f"in {text.strip()!r}: not allowed in a playbook: {e}") from None
        except (TemplateAssertionError, TemplateRuntimeError) as e:  # an unknown filter or test
            raise StepError(f"in {text.strip()!r}: template error: {e.message}") from None
        except TemplateSyntaxError as e:
            raise StepError(f"in {text.strip()!r}: template syntax error: {e.message}") from None
        except LookupError as e:  # `{{ [].pop() }}`, `{}.pop('k')`: the step fails, the run reports it
            raise StepError(f"in {text.strip()!r}: {type(e).__name__}: {e}") from None
        except (TypeError, ValueError, ZeroDivisionError, ArithmeticError) as e:
            raise StepError(f"in {text.strip()!r}: {e}") from None
        except RecursionError:  # a macro that calls itself without end
            raise StepError(f"in {text.strip()!r}: recursion too deep (a macro that calls itself?)") from None


def _env_name(node: nodes.Node | None) -> str | None:
    """X of an ``env.X`` or ``env["X"]`` node, else None."""
    if not isinstance(node, nodes.Getattr | nodes.Getitem) or not isinstance(node.node, nodes.Name) \
            or node.node.name != "env":
        return None
    if isinstance(node, nodes.Getattr):
        return node.attr
    return node.arg.value if isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, str) else None


def _as_template(text: str, expression: bool) -> str:
    if not expression:
        return text
    m = _SINGLE.match(text)
    return text if m else "{{ " + text + " }}"


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name))
