"""Turning a profile name (built-in, or from a KubeSchedulerConfiguration file) into a runnable Profile."""

from __future__ import annotations

import os
from pathlib import Path

from toposched.errors import InputError
from toposched.scheduler import plugins  # noqa: F401  (registers the built-in plugins)
from toposched.scheduler.framework import Profile, registry
from toposched.scheduler.profiles import BUILTIN_PROFILES, builtin_profile, load_scheduler_config

__all__ = ["load_profile"]


def load_profile(name: str | None = None, config: str | os.PathLike[str] | None = None) -> Profile:
    """The profile ``name``: from ``config`` (a KubeSchedulerConfiguration file) when given, else built-in.

    Without a name, a config file's first profile (or the built-in ``toposched``) is used.
    """
    known = registry.known()
    if config is None:
        return Profile.from_config(builtin_profile(name or "toposched", known_plugins=known))
    loaded = load_scheduler_config(Path(config), known_plugins=known)
    if name is None:
        return Profile.from_config(loaded.profiles[0])
    for profile in loaded.profiles:
        if profile.scheduler_name == name:
            return Profile.from_config(profile)
    if name in BUILTIN_PROFILES:
        return load_profile(name)
    raise InputError(f"no profile {name!r}; the file has {', '.join(loaded.scheduler_names)}", field="profile",
                     source=str(config))
