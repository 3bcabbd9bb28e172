"""Planar geometry of feet: poses, sole rectangles, support polygons.

Everything is in the world frame, z up; a foot pose is a position [m] and a
yaw [rad] (feet are flat on the ground while planning).  A support polygon is
a convex polygon given both by its vertices (counter-clockwise) and by
half-planes ``A p <= b`` (rows of ``A`` are outward unit normals).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from zmp_walker.errors import PlanningError

__all__ = [
    "FootPose",
    "SoleRect",
    "Polygon",
    "rotation_z",
    "sole_corners",
    "convex_hull",
    "polygons_overlap",
    "support_polygon",
]


def rotation_z(yaw: float) -> np.ndarray:
    """3x3 rotation about z by ``yaw`` [rad]."""
    c, s = np.cos(yaw), np.sin(yaw)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


@dataclass(frozen=True)
class FootPose:
    """Sole frame placement: ``position`` (3,) [m] in the world, ``yaw`` [rad] about z."""

    position: np.ndarray
    yaw: float = 0.0

    def __post_init__(self):
        p = np.asarray(self.position, dtype=float).reshape(-1)
        if p.shape != (3,) or not np.all(np.isfinite(p)) or not np.isfinite(self.yaw):
            raise PlanningError(f"FootPose needs a finite 3-vector and yaw, got {self.position!r}, {self.yaw!r}")
        p.setflags(write=False)
        object.__setattr__(self, "position", p)
        object.__setattr__(self, "yaw", float(self.yaw))

    @property
    def rotation(self) -> np.ndarray:
        """3x3 world rotation of the sole frame."""
        return rotation_z(self.yaw)

    def to_world(self, local_xy) -> np.ndarray:
        """World xy [m] of a point given in the sole frame (xy)."""
        c, s = np.cos(self.yaw), np.sin(self.yaw)
        x, y = local_xy[0], local_xy[1]
        return self.position[:2] + np.array([c * x - s * y, s * x + c * y])

    def to_local(self, world_xy) -> np.ndarray:
        """Sole-frame xy [m] of a world point (xy)."""
        c, s = np.cos(self.yaw), np.sin(self.yaw)
        d = np.asarray(world_xy[:2], dtype=float) - self.position[:2]
        return np.array([c * d[0] + s * d[1], -s * d[0] + c * d[1]])

    def compose(self, dx: float, dy: float, dyaw: float) -> FootPose:
        """The pose at ``(dx, dy)`` [m] and ``dyaw`` [rad] in this sole frame (same height)."""
        xy = self.to_world((dx, dy))
        return FootPose(np.array([xy[0], xy[1], self.position[2]]), self.yaw + dyaw)


@dataclass(frozen=True)
class SoleRect:
    """Sole contact rectangle in the sole frame [m]."""

    x_min: float
    x_max: float
    y_min: float
    y_max: float

    def __post_init__(self):
        if not (self.x_min < self.x_max and self.y_min < self.y_max):
            raise PlanningError(f"empty sole rectangle {self}")

    @property
    def center(self) -> np.ndarray:
        """Rectangle centre (xy) in the sole frame [m]."""
        return np.array([0.5 * (self.x_min + self.x_max), 0.5 * (self.y_min + self.y_max)])

    def shrunk(self, margin: float) -> SoleRect:
        """Rectangle shrunk by ``margin`` [m] on each side (never below a point)."""
        mx = min(margin, 0.5 * (self.x_max - self.x_min) - 1e-6)
        my = min(margin, 0.5 * (self.y_max - self.y_min) - 1e-6)
        return SoleRect(self.x_min + mx, self.x_max - mx, self.y_min + my, self.y_max - my)

    def corners(self) -> np.ndarray:
        """(4, 2) corners in the sole frame, counter-clockwise."""
        return np.array(
            [[self.x_min, self.y_min], [self.x_max, self.y_min], [self.x_max, self.y_max], [self.x_min, self.y_max]]
        )


def sole_corners(pose: FootPose, sole: SoleRect) -> np.ndarray:
    """(4, 2) world corners of ``sole`` placed at ``pose``, counter-clockwise."""
    c, s = np.cos(pose.yaw), np.sin(pose.yaw)
    local = sole.corners()
    return pose.position[:2] + local @ np.array([[c, s], [-s, c]])


def convex_hull(points: np.ndarray) -> np.ndarray:
    """Counter-clockwise convex hull (Andrew's monotone chain) of (n, 2) points."""
    # Python floats (tolist): tuples of numpy scalars sort and hash several times slower
    pts = sorted(set(map(tuple, np.round(np.asarray(points, dtype=float), 12).tolist())))
    if len(pts) <= 2:
        return np.array(pts)

    def cross(o, a, b):
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])

    lower, upper = [], []
    for p in pts:
        while len(lower) >= 2 and cross(lower[-2], lower[-1], p) <= 1e-15:
            lower.pop()
        lower.append(p)
    for p in reversed(pts):
        while len(upper) >= 2 and cross(upper[-2], upper[-1], p) <= 1e-15:
            upper.pop()
        upper.append(p)
    return np.array(lower[:-1] + upper[:-1])


@dataclass(frozen=True)
class Polygon:
    """Convex polygon: ``vertices`` (n, 2) counter-clockwise and ``A p <= b``."""

    vertices: np.ndarray
    A: np.ndarray = field(init=False)
    b: np.ndarray = field(init=False)

    def __post_init__(self):
        v = np.asarray(self.vertices, dtype=float)
        edges = np.roll(v, -1, axis=0) - v
        normals = np.stack([edges[:, 1], -edges[:, 0]], axis=1)
        normals /= np.linalg.norm(normals, axis=1, keepdims=True)
        object.__setattr__(self, "vertices", v)
        object.__setattr__(self, "A", normals)
        object.__setattr__(self, "b", np.einsum("ij,ij->i", normals, v))

    @classmethod
    def hull(cls, points: np.ndarray) -> Polygon:
        """Convex hull of (n, 2) points."""
        return cls(convex_hull(points))

    def signed_distance(self, p) -> float:
        """max_i (A_i p - b_i) [m]: negative inside, an upper bound of the distance outside."""
        return float(np.max(self.A @ np.asarray(p[:2], dtype=float) - self.b))

    def contains(self, p, tol: float = 0.0) -> bool:
        """Whether the xy point ``p`` is inside, up to ``tol`` [m]."""
        return self.signed_distance(p) <= tol

    def clamp(self, p) -> np.ndarray:
        """Closest point (xy) of the polygon to ``p`` (``p`` itself when inside)."""
        q = np.asarray(p[:2], dtype=float)
        if np.all(self.A @ q <= self.b):
            return q.copy()
        v = self.vertices
        e = np.roll(v, -1, axis=0) - v
        t = np.clip(np.einsum("ij,ij->i", q - v, e) / np.einsum("ij,ij->i", e, e), 0.0, 1.0)
        candidates = v + t[:, None] * e
        return candidates[np.argmin(np.sum((candidates - q) ** 2, axis=1))]


def polygons_overlap(a: np.ndarray, b: np.ndarray, clearance: float = 0.0) -> bool:
    """Whether two convex polygons (vertex arrays) come closer than ``clearance`` [m].

    Separating axis test on the edge normals of both polygons: they are
    separated by at least ``clearance`` along some axis iff no overlap (for
    ``clearance = 0``; with a positive clearance the test is conservative at
    corners, which is what a foot collision check wants).
    """
    for poly in (a, b):
        edges = np.roll(poly, -1, axis=0) - poly
        axes = np.stack([edges[:, 1], -edges[:, 0]], axis=1)
        axes /= np.linalg.norm(axes, axis=1, keepdims=True)
        pa, pb = a @ axes.T, b @ axes.T
        gap = np.maximum(pb.min(axis=0) - pa.max(axis=0), pa.min(axis=0) - pb.max(axis=0))
        if np.any(gap >= clearance):
            return False
    return True


def support_polygon(poses: list[FootPose], soles: list[SoleRect], margin: float = 0.0) -> Polygon:
    """Convex hull of the soles in contact, each shrunk by ``margin`` [m]."""
    if not poses:
        raise PlanningError("support polygon of no foot")
    points = np.vstack([sole_corners(p, s.shrunk(margin)) for p, s in zip(poses, soles)])
    return Polygon.hull(points)
