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
    Undefined,
    UndefinedError,
    meta,
    nodes,
)
from jinja2.runtime import Context
from jinja2.sandbox import SandboxedEnvironment, SecurityError

from playbooks.errors import StepError

MASK = "********"
SECRET_NAME = re.compile(r"pass(word)?|secret|token|credential|private|(^|_)sk$", re.IGNORECASE)
_SINGLE = re.compile(r"^\s*\{\{(?P<expr>.*?)\}\}\s*$", re.DOTALL)
# Ansible's words (module_utils.parsing.convert_bool): what ``-e really=false`` means in a condition.
FALSE_WORDS = frozenset({"false", "no", "off", "0", "n", "f", ""})
TRUE_WORDS = frozenset({"true", "yes", "on", "1", "y", "t"})
# The longest string or list ``*`` may build, and the largest whole number ``**`` may (in bits):
# ``'x' * 10**13`` would allocate terabytes (MemoryError, or the host swapping) before any step could
# report it, and ``10 ** 10**9`` would compute for minutes.
MAX_REPEAT = 1 << 20
MAX_POWER_BITS = 1 << 13  # under Python's 4300-digit limit for printing an int


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


class _PlaybookSandbox(SandboxedEnvironment):
    """The sandbox, also refusing a ``*`` or ``**`` whose result would be huge (a typo'd exponent, a
    repeated string): the playbook's step fails with one line instead of the host running out of memory.
    Intercepting the operators also keeps Jinja from folding ``'x' * 10**13`` while it compiles."""

    intercepted_binops = frozenset({"*", "**"})

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            for seq, times in ((left, right), (right, left)):
                if isinstance(seq, str | list | tuple) and isinstance(times, int) \
                        and len(seq) * times > MAX_REPEAT:
                    raise SecurityError(f"{type(seq).__name__} repeated to {len(seq) * times} items "
                                        f"(more than {MAX_REPEAT})")
        elif operator == "**" and type(left) is int and type(right) is int \
                and abs(left) > 1 and (abs(left).bit_length() - 1) * right > MAX_POWER_BITS:
            raise SecurityError(f"{left} ** {right} is too large (more than {MAX_POWER_BITS} bits)")
        return super().call_binop(context, operator, left, right)


class Templater:
    """Renders values and evaluates expressions against a context of variables (sandboxed)."""

    def __init__(self) -> None:
        self.env = _PlaybookSandbox(undefined=_PlaybookUndefined, autoescape=False, keep_trailing_newline=True)
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

    def all_names(self, value: Any) -> set[str]:
        """Every top-level name the templates inside ``value`` read (dicts and lists too), also those
        behind ``| default(..)``: what a var needs rendered before it. A syntax error reads nothing
        here (``check`` reports it)."""
        if isinstance(value, str):
            if "{{" not in value and "{%" not in value:
                return set()
            try:
                return set(meta.find_undeclared_variables(self.env.parse(value)))
            except TemplateSyntaxError:
                return set()
        if isinstance(value, Mapping):
            return set().union(*(self.all_names(v) for v in value.values()))
        if isinstance(value, list | tuple):
            return set().union(*(self.all_names(v) for v in value))
        return set()

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
        return self._evaluate(expression, context, lambda value: value)

    def condition(self, expression: str | bool, context: Mapping[str, Any]) -> bool:
        """``when:``, ``until:``, ``assert:``: true or false as Ansible reads them (see ``is_true``).
        The truth test runs under the guard too: a value's ``bool()`` can fail as a render can."""
        words = {k: _Word(v) if type(v) is str else v for k, v in context.items()}
        return bool(self._evaluate(expression, words, is_true))

    def _evaluate(self, expression: str | bool, context: Mapping[str, Any], then: Any) -> Any:
        if isinstance(expression, bool):
            return then(expression)
        text = str(expression).strip()
        m = _SINGLE.match(text)
        if m:
            text = m.group("expr")
        return self._guard(lambda: then(self._defined(
            self.env.compile_expression(text, undefined_to_none=False)(dict(context)))), text)

    @staticmethod
    def _defined(value: Any) -> Any:
        """``value``, unless it is an Undefined (``{{ x }}`` alone returns x's Undefined instead of
        failing): then the undefined-variable error, so no Undefined object is ever stored or used."""
        if isinstance(value, Undefined):
            value._fail_with_undefined_error()
        return value

    def _render_text(self, text: str, context: Mapping[str, Any]) -> Any:
        if "{{" not in text and "{%" not in text:
            return text
        m = _SINGLE.match(text)
        if m and "{{" not in m.group("expr") and "{%" not in text:
            expr = m.group("expr")
            return self._guard(lambda: self.env.compile_expression(expr, undefined_to_none=False)(dict(context)), text)
        return self._guard(lambda: self.env.from_string(text).render(dict(context)), text)

    @staticmethod
    def _guard(fn: Any, text: str) -> Any:
        """Run a render; any failure of it becomes a StepError naming the template. Why every exception:
        a filter given the wrong kind of value raises whatever its Python code raises (``dictsort`` on a
        string: AttributeError, ``truncate(-5)``: AssertionError), and one let through ended the run
        with a traceback after earlier steps had changed things, with no report and no run_end."""
        try:
            return Templater._defined(fn())
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
        except MemoryError:
            raise StepError(f"in {text.strip()!r}: out of memory (a value too large to build)") from None
        except Exception as e:  # noqa: BLE001 - see the docstring; KeyboardInterrupt/SystemExit still pass
            raise StepError(f"in {text.strip()!r}: {type(e).__name__}: {e}") from None


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
