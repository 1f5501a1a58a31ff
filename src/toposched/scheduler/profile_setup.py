"""Turning a profile name (built-in, or from a KubeSchedulerConfiguration file) into a runnable Profile."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from toposched.errors import InputError
from toposched.scheduler import plugins  # noqa: F401  (registers the built-in plugins)
from toposched.scheduler.framework import Profile, registry
from toposched.scheduler.nrt_match_args import NodeResourceTopologyMatchArgs
from toposched.scheduler.profiles import BUILTIN_PROFILES, NodeResourcesFitArgs, builtin_profile, load_scheduler_config

__all__ = ["args_parsers", "load_profile"]


def args_parsers() -> Mapping[str, Callable[[Mapping[str, Any]], Any]]:
    """The parsers of plugin args that have their own validated format."""
    return {
        "NodeResourcesFit": NodeResourcesFitArgs.from_dict,
        "NodeResourceTopologyMatch": NodeResourceTopologyMatchArgs.from_dict,
    }


def load_profile(name: str | None = None, config: str | os.PathLike[str] | None = None) -> Profile:
    """The profile ``name``: from ``config`` (a KubeSchedulerConfiguration file) when given, else built-in.

    Without a name, a config file's first profile (or the built-in ``toposched``) is used.
    """
    known = registry.known()
    if config is None:
        return Profile.from_config(builtin_profile(name or "toposched", known_plugins=known, args_parsers=args_parsers()))
    loaded = load_scheduler_config(Path(config), known_plugins=known, args_parsers=args_parsers())
    if name is None:
        return Profile.from_config(loaded.profiles[0])
    for profile in loaded.profiles:
        if profile.scheduler_name == name:
            return Profile.from_config(profile)
    if name in BUILTIN_PROFILES:
        return load_profile(name)
    raise InputError(f"no profile {name!r}; the file has {', '.join(loaded.scheduler_names)}", field="profile",
                     source=str(config))
