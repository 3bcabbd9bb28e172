"""Planar support-polygon geometry against brute force: hull, signed distance, closest point."""

import numpy as np
import pytest

from whole_body_control import geometry


def _dense_boundary(polygon: np.ndarray, n: int = 4000) -> np.ndarray:
    """Points along the closed boundary of ``polygon``, every edge sampled ``n`` times."""
    t = np.linspace(0.0, 1.0, n)[:, None]
    return np.vstack([a + t * (b - a) for a, b in zip(polygon, np.roll(polygon, -1, axis=0))])


@pytest.mark.parametrize("seed", range(5))
def test_signed_distance_and_closest_point_match_a_sampled_boundary(seed):
    rng = np.random.default_rng(seed)
    # two rotated soles, as a double support polygon
    corners = []
    for centre in rng.uniform(-0.3, 0.3, (2, 2)):
        yaw = rng.uniform(-0.5, 0.5)
        rot = np.array([[np.cos(yaw), -np.sin(yaw)], [np.sin(yaw), np.cos(yaw)]])
        corners.append(centre + np.array([[0.1, 0.05], [-0.1, 0.05], [-0.1, -0.05], [0.1, -0.05]]).dot(rot.T))
    hull = geometry.convex_hull(np.vstack(corners))
    boundary = _dense_boundary(hull)
    edges = np.roll(hull, -1, axis=0) - hull
    for p in rng.uniform(-0.6, 0.6, (50, 2)):
        inside = np.all(edges[:, 0] * (p[1] - hull[:, 1]) - edges[:, 1] * (p[0] - hull[:, 0]) >= 0)
        sampled = np.linalg.norm(boundary - p, axis=1).min()
        d = geometry.signed_distance(hull, p)
        assert d == pytest.approx(-sampled if inside else sampled, abs=1e-4)
        c = geometry.closest_point(hull, p)
        if inside:
            np.testing.assert_array_equal(c, p)
        else:
            assert np.linalg.norm(c - p) == pytest.approx(sampled, abs=1e-4)
            assert geometry.signed_distance(hull, c) == pytest.approx(0.0, abs=1e-12)


def test_convex_hull_is_counter_clockwise_and_drops_inner_points():
    square = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    points = np.vstack([square[::-1], [[0.5, 0.5], [0.2, 0.7]], square[:2]])  # repeats, inner points
    hull = geometry.convex_hull(points)
    assert len(hull) == 4 and {tuple(v) for v in hull} == {tuple(v) for v in square}
    x, y = hull[:, 0], hull[:, 1]
    assert 0.5 * np.sum(x * np.roll(y, -1) - np.roll(x, -1) * y) == pytest.approx(1.0)  # CCW: positive area


def test_degenerate_polygons():
    assert geometry.signed_distance(np.zeros((0, 2)), [0.0, 0.0]) == float("inf")
    assert geometry.signed_distance(np.array([[1.0, 1.0]]), [4.0, 5.0]) == pytest.approx(5.0)
    segment = np.array([[0.0, 0.0], [2.0, 0.0]])
    assert geometry.signed_distance(segment, [1.0, 0.0]) == pytest.approx(0.0)  # on it, never inside
    assert geometry.signed_distance(segment, [3.0, 0.0]) == pytest.approx(1.0)
