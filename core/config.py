"""Stage configs: one dataclass per stage, loaded from YAML, overridden from the command line.

`stage_main(Config, run)` gives every stage script the same front: `--config FILE` plus one
flag per dataclass field (so `--help` lists every knob with its default, grouped by concern),
unknown keys and wrong types rejected with one line, and ShrinkbertError printed as `error: ...`
with exit 2.

One `field()` line is a flag, a YAML key, a Python keyword, a bound and a help text at once. An
error names the option the way the user wrote it: `--text-column` on the command line,
`text_column=` from Python, `config key 'text_column'` in YAML (`speaking_as`).
"""
from __future__ import annotations

import argparse
import contextlib
import contextvars
import dataclasses
import math
import os
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any, Callable

import yaml

from shrinkbert.core.errors import ShrinkbertError, error_line
from shrinkbert.core.verify import SKIP_ENV as VERIFY_SKIP_ENV

# Where the values being checked came from: "yaml" (a config file or recipe), "cli" (flags) or
# "api" (Python keywords). Set by `speaking_as` around parsing and running a stage.
_SURFACE: contextvars.ContextVar[str] = contextvars.ContextVar("shrinkbert_surface", default="yaml")
# The group an option is listed under in --help when neither its field nor its class names one.
DEFAULT_GROUP = "options"
FIRST_GROUPS = ("model", "data")
LAST_GROUPS = ("training loop", "output")


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def option_name(name: str) -> str:
    """A config field as the user spelled it: `--text-column`, `text_column=` or 'text_column'."""
    surface = _SURFACE.get()
    if surface == "cli":
        return flag(name)
    if surface == "api":
        return f"{name}="
    return f"config key '{name}'"


def as_keywords(message: str, config_cls) -> str:
    """Stage messages name flags (`pass --task NAME`); from Python they name keywords (`task=`).
    Only flags of `config_cls`'s own fields are rewritten; `--no-x` becomes `x=False`."""
    names = {f.name for f in dataclasses.fields(config_cls)}

    def keyword(match: re.Match) -> str:
        negated, name = match.group(1), match.group(2).replace("-", "_")
        if name not in names:
            return match.group(0)
        return f"{name}=False" if negated else f"{name}="

    return re.sub(r"(?<![\w-])--(no-)?([a-z][a-z0-9-]*)", keyword, message)


@contextlib.contextmanager
def speaking_as(surface: str, config_cls=None):
    """Inside: errors name options as `surface` spells them; from the API, a stage's own messages
    about flags are rewritten to keywords on the way out."""
    token = _SURFACE.set(surface)
    try:
        yield
    except ShrinkbertError as err:
        if surface != "api" or config_cls is None:
            raise
        raise ShrinkbertError(as_keywords(str(err), config_cls)) from None
    finally:
        _SURFACE.reset(token)


def _strip_optional(tp):
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return tp, False


def coerce(value: Any, tp, name: str) -> Any:
    """Check and convert one value to a field's declared type, or raise one clear line."""
    base, optional = _strip_optional(tp)
    if value is None:
        if optional:
            return None
        raise ShrinkbertError(f"{option_name(name)} may not be empty")
    origin = typing.get_origin(base)
    try:
        if base is Any:
            return value
        if base is bool:
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0"):
                return value.lower() in ("true", "yes", "1")
            raise TypeError
        if base in (int, float):
            if isinstance(value, bool):
                raise TypeError
            if base is int and isinstance(value, float) and not value.is_integer():
                raise TypeError
            return base(value)
        if base is str:
            if isinstance(value, (dict, list)):
                raise TypeError
            if isinstance(value, bool):  # YAML reads a bare `off`/`on` as a bool: give the word back
                return "on" if value else "off"
            return str(value)
        if origin is list:
            (item_tp,) = typing.get_args(base) or (Any,)
            if isinstance(value, str):
                value = [v for v in value.split(",") if v]
            if not isinstance(value, (list, tuple)):
                raise TypeError
            return [coerce(v, item_tp, name) for v in value]
        if origin is dict or base is dict:
            if not isinstance(value, dict):
                raise TypeError
            return dict(value)
    except (TypeError, ValueError):
        raise ShrinkbertError(f"{option_name(name)} must be {getattr(base, '__name__', base)}, got {value!r}") from None
    return value


def config_owner(config_cls) -> str:
    """What a config configures, for messages: `ExportConfig` -> export, `TrimVocabConfig` ->
    trim_vocab; a class named plain `Config` (a user's stage) -> its module's name."""
    name = config_cls.__name__.removesuffix("Config")
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower() if name else config_cls.__module__.rsplit(".", 1)[-1]


def build_config(config_cls, values: dict[str, Any] | None = None):
    """Make a config from a plain dict, rejecting unknown keys and wrong types."""
    values = dict(values or {})
    hints = typing.get_type_hints(config_cls)
    known = {f.name for f in dataclasses.fields(config_cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        noun, spell = {"cli": ("option(s)", flag), "api": ("keyword(s)", lambda n: f"{n}=")}.get(
            _SURFACE.get(), ("config key(s)", str))
        raise ShrinkbertError(f"unknown {noun} for {config_owner(config_cls)}: "
                              f"{', '.join(map(spell, unknown))} (known: {', '.join(sorted(known))})")
    coerced = {k: coerce(v, hints[k], k) for k, v in values.items()}
    fields = {f.name: f for f in dataclasses.fields(config_cls)}
    for name, value in coerced.items():
        check_bounds(name, value, fields[name].metadata.get("bounds", {}))
    config = config_cls(**coerced)
    check = getattr(config, "check", None)
    if callable(check):  # constraints between fields (e.g. epochs or max_steps)
        check()
    return config


def read_yaml(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise ShrinkbertError(f"config file {path} does not exist")
    try:
        data = yaml.safe_load(path.read_text())
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise ShrinkbertError(f"config file {path} is not valid YAML: {str(err).splitlines()[0]}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ShrinkbertError(f"config file {path} must hold a mapping of keys to values")
    return data


def to_dict(config) -> dict[str, Any]:
    return dataclasses.asdict(config)


@dataclasses.dataclass(frozen=True)
class Option:
    """One config field as every surface shows it: --help, help(shrinkbert.STAGE), the docs."""
    name: str
    type: Any
    default: Any
    help: str
    bounds: dict[str, Any]
    group: str

    @property
    def is_bool(self) -> bool:
        return _strip_optional(self.type)[0] is bool

    @property
    def type_text(self) -> str:
        base, optional = _strip_optional(self.type)
        text = getattr(base, "__name__", None) if typing.get_origin(base) is None else None
        text = text or str(base).replace("typing.", "")
        return f"{text} | None" if optional else text

    @property
    def bound_text(self) -> str:
        return range_text(self.bounds)


def declared_group(config_cls, name: str) -> str:
    """An option's group: its field's `group`, else the OPTION_GROUP of the class that declares it
    (TrainConfig: the training loop, DataConfig: data), else DEFAULT_GROUP."""
    meta = {f.name: f for f in dataclasses.fields(config_cls)}[name].metadata
    if meta.get("group"):
        return meta["group"]
    for klass in config_cls.__mro__:
        if name in vars(klass).get("__annotations__", {}):
            return vars(klass).get("OPTION_GROUP", DEFAULT_GROUP)
    return DEFAULT_GROUP


def options(config_cls) -> list[Option]:
    """Every field of a stage's Config, in declaration order (base classes first)."""
    hints = typing.get_type_hints(config_cls)
    out = []
    for f in dataclasses.fields(config_cls):
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
        out.append(Option(f.name, hints[f.name], default, f.metadata.get("help", ""),
                          dict(f.metadata.get("bounds", {})), declared_group(config_cls, f.name)))
    return out


def unread_options(config, reads, defaults: dict | None = None) -> list[str]:
    """The options of `config` set away from their defaults that a code path does not read (`reads`:
    the field names it does). `defaults`: values that count as unset besides the fields' own (a
    --quick's settings)."""
    unset = {o.name: o.default for o in options(type(config))} | (defaults or {})
    return [name for name, default in unset.items() if name not in reads and getattr(config, name) != default]


def refuse_options(names: list[str], context: str) -> None:
    """Refuse the options `names` (unread on the code path `context`) in one line; none: nothing."""
    if names:
        listed = ", ".join(option_name(name) for name in names)
        raise ShrinkbertError(f"{listed} {'is' if len(names) == 1 else 'are'} not read {context}: drop "
                              f"{'it' if len(names) == 1 else 'them'}")


def refuse_unread(config, reads, context: str) -> None:
    """Refuse, in one line, every option set away from its default that the code path `context`
    does not read (`reads`: the field names it does): an option accepted and silently ignored is a
    setting the user believes in and never gets."""
    refuse_options(unread_options(config, reads), context)


def grouped(config_cls) -> dict[str, list[Option]]:
    """Options by group: what to work on first, the stage's own groups in declaration order, then
    how to train, then where the result goes (FIRST_GROUPS, LAST_GROUPS)."""
    groups: dict[str, list[Option]] = {}
    for option in options(config_cls):
        groups.setdefault(option.group, []).append(option)
    rank = {name: i for i, name in enumerate(FIRST_GROUPS)}
    rank.update({name: 1000 + i for i, name in enumerate(LAST_GROUPS)})
    order = sorted(groups, key=lambda g: rank.get(g, 100 + list(groups).index(g)))
    return {name: groups[name] for name in order}


def option_help(option: Option) -> str:
    """The help text with its bound, as --help and the API docstring both print it."""
    bound = option.bound_text
    return f"{option.help} [{bound}]" if bound and option.help else option.help or (f"[{bound}]" if bound else "")


def make_parser(config_cls, description: str, prog: str | None = None) -> argparse.ArgumentParser:
    """--config FILE plus one flag per field, in argument groups (data, training loop, ...)."""
    parser = argparse.ArgumentParser(prog=prog, description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     usage="%(prog)s [-h] [--config FILE] [--OPTION VALUE ...]")
    parser.add_argument("--config", metavar="FILE", help="YAML file with any of the keys below; flags override it")
    parser.add_argument("--no-verify", action="store_true", default=argparse.SUPPRESS,
                        help="use input artifacts whose files no longer match the sizes and hashes their manifests "
                             "recorded (a deliberately edited artifact); this artifact's manifest records it")
    for title, group_options in grouped(config_cls).items():
        group = parser.add_argument_group(title)
        for option in group_options:
            # Defaults are SUPPRESSed (only flags the user gave override the YAML file), so the
            # help text states the field's own default; argparse %-formats help strings.
            shown = f" (default: {option.default!r})" if option.default not in ("", None, []) else ""
            text = (option_help(option) + shown).replace("%", "%%")
            kwargs = {"action": argparse.BooleanOptionalAction} if option.is_bool else {}
            if "choices" in option.bounds and not option.is_bool and typing.get_origin(option.type) is not list:
                kwargs["metavar"] = "{" + ",".join(map(str, option.bounds["choices"])) + "}"
            group.add_argument(flag(option.name), dest=option.name, default=argparse.SUPPRESS, help=text, **kwargs)
    return parser


def take_no_verify(args: dict) -> None:
    """Pop --no-verify from parsed arguments and pass it on: core/verify.py reads it, in this process and
    the workers it starts (every command that lists the flag calls this, so none refuses it as unknown)."""
    if args.pop("no_verify", False):
        os.environ[VERIFY_SKIP_ENV] = "1"


def parse_config(config_cls, argv: list[str] | None, description: str, prog: str | None = None):
    args = vars(make_parser(config_cls, description, prog).parse_args(argv))
    take_no_verify(args)
    values = read_yaml(args.pop("config")) if args.get("config") else {}
    args.pop("config", None)
    values.update(args)
    return build_config(config_cls, values)


def stage_main(config_cls, run: Callable[[Any], Any], description: str,
               argv: list[str] | None = None, prog: str | None = None) -> int:
    """Parse a stage's config from argv, run it, and turn user errors into one line + exit 2.
    Errors name flags (`--text-column`)."""
    try:
        with speaking_as("cli"):
            config = parse_config(config_cls, argv, description, prog)
            run(config)
    except Exception as err:  # a user's error, a full disk or a refused folder: one line; a bug: a traceback
        line = error_line(err)
        if line is None:
            raise
        print(f"error: {line}", file=sys.stderr)
        return 2
    return 0


def field(default: Any, help: str = "", *, min: float | None = None, max: float | None = None,
          above: float | None = None, below: float | None = None, choices: typing.Sequence | None = None,
          group: str | None = None) -> Any:
    """A dataclass field with help text that `--help` shows; lists and dicts get a factory.

    Bounds are checked where configs are parsed (`build_config`, so the command line, YAML and
    recipes): `min`/`max` inclusive, `above`/`below` exclusive, `choices` the allowed values. A list
    field's bounds apply to each item. `group` is the --help section it is listed in (default: the
    declaring class's OPTION_GROUP).
    """
    bounds = {k: v for k, v in (("min", min), ("max", max), ("above", above), ("below", below),
                                ("choices", tuple(choices) if choices is not None else None)) if v is not None}
    metadata = {"help": help, **({"bounds": bounds} if bounds else {}), **({"group": group} if group else {})}
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def range_text(bounds: dict[str, Any]) -> str:
    if "choices" in bounds:
        return "one of " + ", ".join(map(str, bounds["choices"]))
    parts = [f"{op} {bounds[key]}" for key, op in (("min", ">="), ("above", ">"), ("max", "<="), ("below", "<"))
             if key in bounds]
    return " and ".join(parts)


def check_bounds(name: str, value: Any, bounds: dict[str, Any]) -> None:
    """Raise one clear line when a parsed value is outside its field's declared range."""
    if value is None or not bounds:
        return
    if isinstance(value, list):
        for item in value:
            check_bounds(name, item, bounds)
        return
    if "choices" in bounds:
        if value not in bounds["choices"]:
            raise ShrinkbertError(f"{option_name(name)} must be {range_text(bounds)}, got {value!r}")
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    bad = ((isinstance(value, float) and not math.isfinite(value))
           or ("min" in bounds and value < bounds["min"]) or ("max" in bounds and value > bounds["max"])
           or ("above" in bounds and value <= bounds["above"]) or ("below" in bounds and value >= bounds["below"]))
    if bad:
        raise ShrinkbertError(f"{option_name(name)} must be {range_text(bounds)}, got {value!r}")
