"""YAML -> frozen dataclasses, validated at load time: :mod:`zmp_walker.base.yaml_config`,
the loader shared with ``zmp_walker``, under the name this package's modules use."""

from zmp_walker.base.yaml_config import closest_key, from_dict, load, read_yaml, to_dict, unknown_key_error

__all__ = ["closest_key", "from_dict", "load", "read_yaml", "to_dict", "unknown_key_error"]
