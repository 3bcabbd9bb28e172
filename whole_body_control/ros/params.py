"""Parameter declaration with descriptions and ranges (generate_parameter_library style).

Each node lists its parameters as :class:`Param` s; :func:`declare` declares them
with a ``ParameterDescriptor`` (description, ``FloatingPointRange`` /
``IntegerRange``, read-only flag), so that rclpy itself rejects out-of-range
values at start-up and at run time.  Checks that a range cannot express go into
the node's ``add_on_set_parameters_callback``, which must return a reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, SetParametersResult
from rclpy.node import Node
from rclpy.parameter import Parameter

INF = 1.0e300  # "no upper bound" (FloatingPointRange needs a finite bound)


@dataclass(frozen=True)
class Param:
    """One parameter: ``name``, ``default`` (its type is the parameter's type), a
    ``description`` with units, an optional inclusive ``range`` (lo, hi) for
    numbers, and ``read_only`` for what is read once at start-up."""

    name: str
    default: Any
    description: str
    range: tuple[float, float] | None = None
    read_only: bool = False

    def descriptor(self) -> ParameterDescriptor:
        d = ParameterDescriptor(name=self.name, description=self.description, read_only=self.read_only)
        if self.range is not None:
            lo, hi = self.range
            if isinstance(self.default, bool):
                raise TypeError(f"parameter '{self.name}': a bool has no range")
            if isinstance(self.default, int):
                d.integer_range = [IntegerRange(from_value=int(lo), to_value=int(hi), step=0)]
            else:
                d.floating_point_range = [FloatingPointRange(from_value=float(lo), to_value=float(hi), step=0.0)]
        return d


def declare(node: Node, params: list[Param]) -> dict[str, Any]:
    """Declare ``params`` on ``node``; returns ``{name: value}`` (overrides applied)."""
    values = {}
    for p in params:
        default = p.default
        if isinstance(default, (list, tuple)) and len(default) == 0:
            default = Parameter.Type.STRING_ARRAY  # an empty list has no type: declare as string array
        param = node.declare_parameter(p.name, default, p.descriptor())
        value = param.value
        values[p.name] = list(value) if isinstance(value, (list, tuple)) or hasattr(value, "tolist") else value
    return values


def result(reason: str = "") -> SetParametersResult:
    """``SetParametersResult``: successful when ``reason`` is empty."""
    return SetParametersResult(successful=not reason, reason=reason)


def spin(node_class, args=None) -> None:
    """``main()`` of a node: init, spin ``node_class()`` until Ctrl-C / SIGTERM, clean up."""
    import signal

    import rclpy
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor

    rclpy.init(args=args)
    signal.signal(signal.SIGTERM, lambda *_: rclpy.try_shutdown())
    node = None
    try:
        node = node_class()
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
