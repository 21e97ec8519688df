"""Configurations: named, parseable recipes to compile and run a Program (see `registry`)."""

from xlaprobe.configs.registry import Configuration, ConfigKind, get_kind, kinds, parse_configs

__all__ = ["Configuration", "ConfigKind", "get_kind", "kinds", "parse_configs"]
