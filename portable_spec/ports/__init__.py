"""Platform ports behind one interface (``DevicePort``) and the registry that selects one."""

from portable_spec.ports.interface import DevicePort
from portable_spec.ports.registry import (
    PLATFORMS,
    detect_platform_name,
    env_platform_name,
    platform_class,
    platform_names,
    requested_platform_name,
    select_platform,
)

__all__ = ["DevicePort", "PLATFORMS", "detect_platform_name", "env_platform_name", "platform_class",
           "platform_names", "requested_platform_name", "select_platform"]
