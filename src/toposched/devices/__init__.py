"""Devices as the scheduler sees them: extended resources, per-node inventories, joint device choice."""

from toposched.devices.inventory import DeviceInventory, NodeDevice, pcie_switch
from toposched.devices.joint import DeviceChoice, DeviceScope, choose_devices
from toposched.devices.resources import DeviceResourceMap, ResourceRule, load_resource_map

__all__ = [
    "DeviceChoice",
    "DeviceInventory",
    "DeviceResourceMap",
    "DeviceScope",
    "NodeDevice",
    "ResourceRule",
    "choose_devices",
    "load_resource_map",
    "pcie_switch",
]
