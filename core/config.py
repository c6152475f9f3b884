"""Stage configs: one dataclass per stage, loaded from YAML, overridden from the command line.

`stage_main(Config, run)` gives every stage script the same front: `--config FILE` plus one
flag per dataclass field (so `--help` lists every knob with its default), unknown keys and
wrong types rejected with one line, and ShrinkbertError printed as `error: ...` with exit 2.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import types
import typing
from pathlib import Path
from typing import Any, Callable

import yaml

from shrinkbert.core.errors import ShrinkbertError


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
        raise ShrinkbertError(f"config key '{name}' may not be empty")
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
            return str(value)
        if origin is list:
            (item_tp,) = typing.get_args(base) or (Any,)
            if isinstance(value, str):
                value = [v for v in value.split(",") if v]
            if not isinstance(value, (list, tuple)):
                raise TypeError
            return [coerce(v, item_tp, f"{name}[]") for v in value]
        if origin is dict or base is dict:
            if not isinstance(value, dict):
                raise TypeError
            return dict(value)
    except (TypeError, ValueError):
        raise ShrinkbertError(f"config key '{name}' must be {getattr(base, '__name__', base)}, got {value!r}") from None
    return value


def build_config(config_cls, values: dict[str, Any] | None = None):
    """Make a config from a plain dict, rejecting unknown keys and wrong types."""
    values = dict(values or {})
    hints = typing.get_type_hints(config_cls)
    known = {f.name for f in dataclasses.fields(config_cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ShrinkbertError(f"unknown config key(s) for {config_cls.__name__}: {', '.join(unknown)} "
                              f"(known: {', '.join(sorted(known))})")
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


def _field_help(field: dataclasses.Field) -> str:
    doc = field.metadata.get("help", "")
    return f"{doc} (default: {field.default if field.default is not dataclasses.MISSING else '...'})"


def make_parser(config_cls, description: str, prog: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=description,
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--config", help="YAML file with any of the keys below; flags override it")
    for field in dataclasses.fields(config_cls):
        flag = "--" + field.name.replace("_", "-")
        base, _ = _strip_optional(typing.get_type_hints(config_cls)[field.name])
        if base is bool:
            parser.add_argument(flag, dest=field.name, action=argparse.BooleanOptionalAction,
                                default=argparse.SUPPRESS, help=field.metadata.get("help", "").replace("%", "%%"))
        else:
            parser.add_argument(flag, dest=field.name, default=argparse.SUPPRESS,
                                help=field.metadata.get("help", "").replace("%", "%%"))
    return parser


def parse_config(config_cls, argv: list[str] | None, description: str, prog: str | None = None):
    args = vars(make_parser(config_cls, description, prog).parse_args(argv))
    values = read_yaml(args.pop("config")) if args.get("config") else {}
    args.pop("config", None)
    values.update(args)
    return build_config(config_cls, values)


def stage_main(config_cls, run: Callable[[Any], Any], description: str,
               argv: list[str] | None = None, prog: str | None = None) -> int:
    """Parse a stage's config from argv, run it, and turn user errors into one line + exit 2."""
    try:
        config = parse_config(config_cls, argv, description, prog)
        run(config)
    except ShrinkbertError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


def field(default: Any, help: str = "", *, min: float | None = None, max: float | None = None,
          above: float | None = None, below: float | None = None, choices: typing.Sequence | None = None) -> Any:
    """A dataclass field with help text that `--help` shows; lists and dicts get a factory.

    Bounds are checked where configs are parsed (`build_config`, so the command line, YAML and
    recipes): `min`/`max` inclusive, `above`/`below` exclusive, `choices` the allowed values. A list
    field's bounds apply to each item.
    """
    bounds = {k: v for k, v in (("min", min), ("max", max), ("above", above), ("below", below),
                                ("choices", tuple(choices) if choices is not None else None)) if v is not None}
    metadata = {"help": help, **({"bounds": bounds} if bounds else {})}
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def _range_text(bounds: dict[str, Any]) -> str:
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
            raise ShrinkbertError(f"config key '{name}' must be {_range_text(bounds)}, got {value!r}")
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    bad = ((isinstance(value, float) and not math.isfinite(value))
           or ("min" in bounds and value < bounds["min"]) or ("max" in bounds and value > bounds["max"])
           or ("above" in bounds and value <= bounds["above"]) or ("below" in bounds and value >= bounds["below"]))
    if bad:
        raise ShrinkbertError(f"config key '{name}' must be {_range_text(bounds)}, got {value!r}")
