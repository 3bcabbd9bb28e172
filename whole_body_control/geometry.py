"""Planar geometry for support polygons (world x-y, metres)."""

from __future__ import annotations

import math

import numpy as np

from zmp_walker.geometry import convex_hull  # one hull for the walker and the controller

__all__ = ["convex_hull", "signed_distance", "closest_point", "shrink"]


def signed_distance(polygon: np.ndarray, point: np.ndarray) -> float:
    """Distance [m] from ``point`` to the boundary of convex CCW ``polygon``: negative inside.

    Plain Python floats: polygons have a few vertices, and each numpy call on them would cost
    more than its arithmetic (the runs ask several times a tick)."""
    px, py = float(point[0]), float(point[1])
    vertices = polygon.tolist() if isinstance(polygon, np.ndarray) else [list(v) for v in polygon]
    n = len(vertices)
    if n == 0:
        return float("inf")
    if n == 1:
        return math.hypot(px - vertices[0][0], py - vertices[0][1])
    inside = True
    best = float("inf")
    for i in range(n):
        ax, ay = vertices[i]
        bx, by = vertices[(i + 1) % n]
        abx, aby = bx - ax, by - ay
        if (abx * (py - ay) - aby * (px - ax)) < 0:
            inside = False
        t = min(max(((px - ax) * abx + (py - ay) * aby) / max(abx * abx + aby * aby, 1e-18), 0.0), 1.0)
        best = min(best, math.hypot(px - (ax + t * abx), py - (ay + t * aby)))
    return -best if inside and n >= 3 else best


def closest_point(polygon: np.ndarray, point: np.ndarray) -> np.ndarray:
    """The point of convex CCW ``polygon`` (boundary included) closest to ``point``."""
    p = np.asarray(point, dtype=float)[:2]
    if signed_distance(polygon, p) <= 0:
        return p.copy()
    best, best_d = polygon[0], float("inf")
    n = len(polygon)
    for i in range(n):
        a, b = polygon[i], polygon[(i + 1) % n]
        ab = b - a
        t = np.clip(np.dot(p - a, ab) / max(np.dot(ab, ab), 1e-18), 0.0, 1.0)
        c = a + t * ab
        d = float(np.linalg.norm(p - c))
        if d < best_d:
            best, best_d = c, d
    return np.array(best, dtype=float)


def shrink(polygon: np.ndarray, margin: float) -> np.ndarray:
    """Move the vertices of a convex polygon toward its centroid by ``margin`` [m] (approximate inset)."""
    if margin <= 0 or len(polygon) < 3:
        return polygon
    c = polygon.mean(axis=0)
    d = polygon - c
    norms = np.linalg.norm(d, axis=1, keepdims=True)
    return c + d * np.maximum(norms - margin, 0.0) / np.maximum(norms, 1e-12)
