"""Platform ports behind one interface (``DevicePlatform``) and the registry that selects one."""

from portable_spec.platforms.interface import DevicePlatform
from portable_spec.platforms.registry import (
    PLATFORMS,
    detect_platform_name,
    env_platform_name,
    platform_class,
    platform_names,
    requested_platform_name,
    select_platform,
)

__all__ = ["DevicePlatform", "PLATFORMS", "detect_platform_name", "env_platform_name", "platform_class",
           "platform_names", "requested_platform_name", "select_platform"]
