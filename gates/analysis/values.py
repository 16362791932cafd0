"""The static evaluator: what number (or declaration) an expression stands for, without running anything.

Rules that judge limits (CRL2 timeouts; CRL3's connection budget) ask one `StaticValues` per checked file:

- `number(node, scope)` -> `float`, `None` (the expression is the literal `None`: "no value"), or
  `Unresolved(reason, where)`. It reads literals, arithmetic, `min`/`max`, `int(...)`/`float(...)`,
  `datetime.timedelta(...)` (in seconds) and `.total_seconds()`, environment reads with a static default
  (`int(os.environ.get("N", "20"))`, `os.getenv`), and names: module-level constants of this module or
  of another project module (`import settings` + `settings.X`, `from .settings import X`, `src/` layout),
  and Django's `settings.X` (`from django.conf import settings`), in the module the project's
  `os.environ.setdefault("DJANGO_SETTINGS_MODULE", ...)` names.
- `string(node, scope)` -> `str` or `Unresolved`, by the same rules, for settings that are names.
- `definition(node, scope)` -> `Located(node, values)` or `Unresolved`: the expression, function or class
  a name stands for, with the evaluator of the module that holds it (a `Queue(...)` imported from
  `app/queues.py` comes back with `app/queues.py`'s evaluator).
- `class_attribute(located_class, name, unset)` reads a class attribute through project base classes.

A name bound more than once at module level, a local variable, a call the evaluator does not know, or a
module outside the project is `Unresolved` with the reason and the place: the caller reports it (fail
closed), it never guesses. Every other file consulted is recorded as a dependency of the checked file.
"""

from __future__ import annotations

import ast
import math
import weakref
from typing import TYPE_CHECKING, NamedTuple

from corral.gates.analysis.modules import ModuleInfo, ProjectModules
from corral.gates.analysis.names import LOCAL, Scope

if TYPE_CHECKING:
    from corral.gates.analysis.context import FileContext

# Deeper than any honest chain of constants; also what stops a cycle of imports.
MAX_DEPTH = 40
ENVIRONMENT_READS = frozenset({"os.environ.get", "os.getenv", "os.environ.setdefault"})
TIMEDELTA = frozenset({"datetime.timedelta"})
# Read through the module DJANGO_SETTINGS_MODULE names (`from django.conf import settings`, `settings.X`).
DJANGO_SETTINGS = "django.conf.settings"
_TIMEDELTA_SECONDS = {
    "weeks": 604800.0,
    "days": 86400.0,
    "hours": 3600.0,
    "minutes": 60.0,
    "seconds": 1.0,
    "milliseconds": 0.001,
    "microseconds": 0.000001,
}
_TIMEDELTA_POSITIONAL = ("days", "seconds", "microseconds", "milliseconds", "minutes", "hours", "weeks")


class Unresolved(NamedTuple):
    """Why a value cannot be known statically, and where (`path:line`) the evaluator got stuck."""

    reason: str
    where: str

    def __str__(self) -> str:
        return f"{self.reason} ({self.where})"


class Located(NamedTuple):
    """A definition (an expression, a function or class, or a whole module) and its module's evaluator."""

    node: ast.AST
    values: StaticValues


Number = float | None


def assigned_in_body(cls: ast.ClassDef, name: str) -> ast.expr | None:
    """The value the first assignment (or annotated assignment) of `name` in the class body gives it."""
    for statement in cls.body:
        if isinstance(statement, ast.Assign):
            targets, value = statement.targets, statement.value
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            targets, value = [statement.target], statement.value
        else:
            continue
        if any(isinstance(target, ast.Name) and target.id == name for target in targets):
            return value
    return None


class StaticValues:
    """Evaluates the expressions of one module; `project` locates the others and records dependencies."""

    def __init__(self, module: ModuleInfo, project: ProjectModules, depth: int = 0) -> None:
        self.module = module
        self.project = project
        self.depth = depth

    @classmethod
    def of(cls, context: FileContext) -> StaticValues:
        """The evaluator of a checked file (one per file, shared by its rules)."""
        known = _BY_CONTEXT.get(context)
        if known is None:
            config = context.config
            project = ProjectModules(config.root, context.relpath, context.dependencies, config.whole_tree)
            known = cls(ModuleInfo(context.relpath, context.tree, context.names), project)
            _BY_CONTEXT[context] = known
        return known

    def for_module(self, module: ModuleInfo) -> StaticValues:
        if module is self.module:
            return self
        return StaticValues(module, self.project, self.depth + 1)

    def where(self, node: ast.AST) -> str:
        return f"{self.module.relpath}:{getattr(node, 'lineno', 1)}"

    def unresolved(self, node: ast.AST, reason: str) -> Unresolved:
        return Unresolved(reason, self.where(node))

    def dotted(self, node: ast.expr, scope: Scope | None = None) -> str | None:
        """The dotted name `node` refers to through imports and aliases (see `names.py`)."""
        return self.module.names.resolve(node, scope or self.module.names.root)

    # -- numbers and strings -------------------------------------------------------------------

    def number(self, node: ast.expr, scope: Scope | None = None) -> Number | Unresolved:
        """The number `node` evaluates to (always finite); None for the literal None."""
        value = self._number(node, scope)
        if isinstance(value, float) and not math.isfinite(value):
            return self.unresolved(node, f"{_shown(node)} is not a finite number")
        return value

    def _number(self, node: ast.expr, scope: Scope | None) -> Number | Unresolved:
        if self.depth > MAX_DEPTH:
            return self.unresolved(node, "too many indirections (a cycle?)")
        if isinstance(node, ast.Constant):
            return self._constant_number(node)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            operand = self.number(node.operand, scope)
            if isinstance(operand, float):
                return -operand if isinstance(node.op, ast.USub) else operand
            return operand if isinstance(operand, Unresolved) else self.unresolved(node, "arithmetic on None")
        if isinstance(node, ast.BinOp):
            return self._arithmetic(node, scope)
        if isinstance(node, (ast.Name, ast.Attribute)):
            located = self.definition(node, scope)
            if isinstance(located, Unresolved):
                return located
            if not isinstance(located.node, ast.expr):
                return self.unresolved(node, f"{ast.unparse(node)} is not a number")
            return located.values.number(located.node)
        if isinstance(node, ast.Call):
            return self._call_number(node, scope)
        if isinstance(node, ast.Subscript) and self.dotted(node.value, scope) == "os.environ":
            return self.unresolved(node, f"{ast.unparse(node)} reads the environment with no static default")
        return self.unresolved(node, f"{_shown(node)} cannot be evaluated statically")

    def string(self, node: ast.expr, scope: Scope | None = None) -> str | Unresolved:
        if self.depth > MAX_DEPTH:
            return self.unresolved(node, "too many indirections (a cycle?)")
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, (ast.Name, ast.Attribute)):
            located = self.definition(node, scope)
            if isinstance(located, Unresolved):
                return located
            if isinstance(located.node, ast.expr):
                return located.values.string(located.node)
        if isinstance(node, ast.Call) and self.dotted(node.func, scope) in ENVIRONMENT_READS:
            default = _environment_default(node)
            if default is not None:
                return self.string(default, scope)
            return self.unresolved(node, f"{_shown(node)} reads the environment with no static default")
        return self.unresolved(node, f"{_shown(node)} is not a string the gate can read")

    def _constant_number(self, node: ast.Constant) -> Number | Unresolved:
        value = node.value
        if value is None:
            return None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value.strip())
            except ValueError:
                pass
        return self.unresolved(node, f"{value!r} is not a number")

    def _arithmetic(self, node: ast.BinOp, scope: Scope | None) -> Number | Unresolved:
        left, right = self.number(node.left, scope), self.number(node.right, scope)
        if isinstance(left, Unresolved):
            return left
        if isinstance(right, Unresolved):
            return right
        if left is None or right is None:
            return self.unresolved(node, "arithmetic on None")
        result: float
        try:
            if isinstance(node.op, ast.Add):
                result = left + right
            elif isinstance(node.op, ast.Sub):
                result = left - right
            elif isinstance(node.op, ast.Mult):
                result = left * right
            elif isinstance(node.op, ast.Div):
                result = left / right
            elif isinstance(node.op, ast.FloorDiv):
                result = float(left // right)
            elif isinstance(node.op, ast.Mod):
                result = left % right
            elif isinstance(node.op, ast.Pow) and abs(right) <= 64:
                result = float(left) ** float(right)
            else:
                return self.unresolved(node, f"{_shown(node)} cannot be evaluated statically")
        except (ZeroDivisionError, OverflowError, TypeError):
            return self.unresolved(node, f"{_shown(node)} has no finite value")
        if not isinstance(result, float) or not math.isfinite(result):
            return self.unresolved(node, f"{_shown(node)} has no finite value")
        return result

    def _call_number(self, node: ast.Call, scope: Scope | None) -> Number | Unresolved:
        called = self.dotted(node.func, scope)
        if called in ("builtins.int", "builtins.float") and len(node.args) == 1 and not node.keywords:
            value = self.number(node.args[0], scope)
            if isinstance(value, float) and called == "builtins.int":
                return float(math.trunc(value))
            return value
        if called in ("builtins.min", "builtins.max") and node.args and not node.keywords:
            values = [self.number(argument, scope) for argument in node.args]
            for value in values:
                if isinstance(value, Unresolved):
                    return value
            numbers = [value for value in values if isinstance(value, float)]
            if len(numbers) != len(values) or any(isinstance(a, ast.Starred) for a in node.args):
                return self.unresolved(node, f"{_shown(node)} cannot be evaluated statically")
            return min(numbers) if called == "builtins.min" else max(numbers)
        if called in ENVIRONMENT_READS:
            default = _environment_default(node)
            if default is None:
                return self.unresolved(node, f"{_shown(node)} reads the environment with no static default")
            return self.number(default, scope)
        if called in TIMEDELTA:
            return self._timedelta(node, scope)
        if isinstance(node.func, ast.Attribute) and node.func.attr == "total_seconds" and not node.args:
            return self.number(node.func.value, scope)
        return self.unresolved(node, f"{_shown(node)} is a call the gate cannot evaluate")

    def _timedelta(self, node: ast.Call, scope: Scope | None) -> Number | Unresolved:
        parts = [(name, argument) for name, argument in zip(_TIMEDELTA_POSITIONAL, node.args, strict=False)]
        parts.extend((keyword.arg or "", keyword.value) for keyword in node.keywords)
        if len(node.args) > len(_TIMEDELTA_POSITIONAL) or any(isinstance(a, ast.Starred) for a in node.args):
            return self.unresolved(node, f"{_shown(node)} cannot be evaluated statically")
        total = 0.0
        for unit, argument in parts:
            if unit not in _TIMEDELTA_SECONDS:
                return self.unresolved(node, f"{_shown(node)} cannot be evaluated statically")
            value = self.number(argument, scope)
            if not isinstance(value, float):
                return value if isinstance(value, Unresolved) else self.unresolved(argument, "None in a timedelta")
            total += value * _TIMEDELTA_SECONDS[unit]
        return total

    # -- definitions ---------------------------------------------------------------------------

    def definition(self, node: ast.expr, scope: Scope | None = None) -> Located | Unresolved:
        """The expression, function, class or module `node` (a name or attribute) stands for."""
        if self.depth > MAX_DEPTH:
            return self.unresolved(node, "too many indirections (a cycle?)")
        if isinstance(node, ast.Name):
            return self._name(node, node.id, scope or self.module.names.root)
        if isinstance(node, ast.Attribute):
            dotted = self.dotted(node, scope)
            if dotted is not None:
                return self.lookup(dotted, node)
            owner = self.definition(node.value, scope)
            if isinstance(owner, Unresolved):
                return owner
            return owner.values.member(owner, node.attr, node)
        return Located(node, self)

    def _name(self, node: ast.AST, name: str, scope: Scope) -> Located | Unresolved:
        binder = scope.binder(name)
        if binder is not None and binder is not self.module.names.root:
            target = binder.bindings[name]
            if target == LOCAL:
                return self.unresolved(node, f"{name} is a local name, not a module-level constant")
            return self.lookup(target, node)
        return self.member(Located(self.module.tree, self), name, node)

    def member(self, owner: Located, name: str, node: ast.AST) -> Located | Unresolved:
        """`owner.name` where the owner is a module (its top level) or a class (its attributes)."""
        if isinstance(owner.node, ast.ClassDef):
            found = owner.values.class_attribute(owner, name, frozenset())
            if found is None:
                return self.unresolved(node, f"class {owner.node.name} has no attribute {name}")
            return found
        if not isinstance(owner.node, ast.Module):
            return self.unresolved(node, f"{_shown(node)} is not a module-level constant")
        values = owner.values
        module = values.module
        bindings = module.bindings.get(name, [])
        if len(bindings) > 1:
            lines = ", ".join(str(getattr(binding, "lineno", "?")) for binding in bindings)
            return values.unresolved(bindings[-1], f"{name} is bound more than once (lines {lines})")
        if len(bindings) == 1:
            (binding,) = bindings
            if isinstance(binding, (ast.Import, ast.ImportFrom)):
                target = module.names.root.lookup(name)
                if target is None:
                    return values.unresolved(binding, f"{name} cannot be resolved")
                return values.lookup(target, binding)
            unpacked = isinstance(binding, (ast.Tuple, ast.List)) and isinstance(binding.ctx, ast.Store)
            if unpacked or isinstance(binding, (ast.AugAssign, ast.Delete)):
                return values.unresolved(binding, f"{name} is not assigned a single value")
            return Located(binding, values)
        for star in module.star_imports:
            starred = values.project.module(star)
            if starred is not None and name in starred.bindings:
                inner = values.for_module(starred)
                return inner.member(Located(starred.tree, inner), name, node)
        return self.unresolved(node, f"{module_label(module)} defines no module-level {name}")

    def lookup(self, dotted: str, node: ast.AST) -> Located | Unresolved:
        """What a dotted name (`app.settings.TIMEOUT`) stands for, through the project's modules."""
        if self.depth > MAX_DEPTH:
            return self.unresolved(node, "too many indirections (a cycle?)")
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):
            module = self.project.module(".".join(parts[:cut]))
            if module is None:
                continue
            values = self.for_module(module)
            located: Located | Unresolved = Located(module.tree, values)
            for attribute in parts[cut:]:
                if isinstance(located, Unresolved):
                    break
                located = self.member(located, attribute, node)
            return located
        if dotted.startswith(DJANGO_SETTINGS + "."):
            return self._django_setting(dotted[len(DJANGO_SETTINGS) + 1 :], node)
        elsewhere = next(
            (found for cut in range(len(parts), 0, -1) if (found := self.project.elsewhere(".".join(parts[:cut])))), []
        )
        if elsewhere:
            return self.unresolved(node, f"{dotted} cannot be resolved from this file" + _found_elsewhere(elsewhere))
        return self.unresolved(node, f"{dotted} is not defined in a module of this project")

    def _django_setting(self, name: str, node: ast.AST) -> Located | Unresolved:
        """`django.conf.settings.NAME`: NAME in the settings module the project's
        `os.environ.setdefault("DJANGO_SETTINGS_MODULE", "...")` calls name (manage.py, wsgi.py, the Celery
        app), when they all name the same one; several, or none, is Unresolved with the places."""
        named: dict[str, list[str]] = {}
        namers: dict[str, str] = {}  # the first file naming each settings module: where it is looked for
        for relpath in self.project.files_containing(b"DJANGO_SETTINGS_MODULE"):
            module = self.project.file(relpath)
            if module is None:
                continue
            values = self.for_module(module)
            for call in ast.walk(module.tree):
                if isinstance(call, ast.Call) and len(call.args) == 2 and sets_django_settings_module(call, values):
                    settings = values.string(call.args[1])
                    if isinstance(settings, str):
                        named.setdefault(settings, []).append(values.where(call))
                        namers.setdefault(settings, relpath)
        if not named:
            return self.unresolved(
                node,
                f'django.conf.settings.{name}: no os.environ.setdefault("DJANGO_SETTINGS_MODULE", ...) of this '
                "project names its settings module",
            )
        if len(named) > 1:
            places = "; ".join(f"{settings} ({', '.join(where)})" for settings, where in sorted(named.items()))
            return self.unresolved(
                node, f"django.conf.settings.{name}: DJANGO_SETTINGS_MODULE names more than one module: {places}"
            )
        ((settings, _),) = named.items()
        module = self.project.module(settings, near=namers[settings])
        if module is None:
            return self.unresolved(
                node,
                f"django.conf.settings.{name}: the settings module {settings} is not a module of this project"
                + _found_elsewhere(self.project.elsewhere(settings)),
            )
        return self.member(Located(module.tree, self.for_module(module)), name, node)

    def class_attribute(
        self, owner: Located, name: str, unset: frozenset[str], depth: int = 0
    ) -> Located | Unresolved | None:
        """`name` as a class attribute of the class `owner`, through its bases; None when no class in the
        chain sets it and every base outside the project is one of `unset` (known not to set it)."""
        cls, values = owner.node, owner.values
        if not isinstance(cls, ast.ClassDef) or depth > MAX_DEPTH:
            return values.unresolved(cls, "too many base classes (a cycle?)")
        own = assigned_in_body(cls, name)
        if own is not None:
            return Located(own, values)
        for base in cls.bases:
            dotted = values.dotted(base)
            if dotted in unset or dotted == "builtins.object":
                continue
            located = values.definition(base)
            if isinstance(located, Unresolved):
                return located
            if not isinstance(located.node, ast.ClassDef):
                return values.unresolved(base, f"base class {_shown(base)} cannot be read")
            found = self.class_attribute(located, name, unset, depth + 1)
            if found is not None:
                return found
        return None


_BY_CONTEXT: weakref.WeakKeyDictionary[FileContext, StaticValues] = weakref.WeakKeyDictionary()


def sets_django_settings_module(call: ast.Call, values: StaticValues) -> bool:
    """Whether `call` is `os.environ.setdefault("DJANGO_SETTINGS_MODULE", ...)`, which names the settings module."""
    return (
        bool(call.args)
        and isinstance(call.args[0], ast.Constant)
        and call.args[0].value == "DJANGO_SETTINGS_MODULE"
        and values.dotted(call.func) == "os.environ.setdefault"
    )


def _environment_default(node: ast.Call) -> ast.expr | None:
    if len(node.args) >= 2:
        return node.args[1]
    for keyword in node.keywords:
        if keyword.arg in ("default", "value"):
            return keyword.value
    return None


def module_label(module: ModuleInfo) -> str:
    return module.relpath or module.names.module


def _shown(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 60 else text[:57] + "..."


def _found_elsewhere(relpaths: list[str]) -> str:
    """The hint of a module looked for and not found where this file's imports resolve, though a project
    file of that name exists under another folder (another service of a monorepo, say)."""
    if not relpaths:
        return ""
    return (
        f": {', '.join(relpaths)} would hold it, but its folder is not where this file's imports are looked for "
        "(this file's package root, the project root, src/); run corral from the folder the service runs in"
    )
