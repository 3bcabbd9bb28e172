"""zmp_walker on uneven ground: footstep heights from a terrain map, swing clearance
over a step edge, CoM height following the support."""

import numpy as np
import pytest

from zmp_walker import FootPose, PatternGenerator, SoleRect, load_walker_config

SOLE = SoleRect(-0.10, 0.10, -0.065, 0.065)  # Talos-size
EDGE, HEIGHT = 0.75, 0.05  # platform: x >= EDGE is 5 cm high


def ground(x, y):
    return HEIGHT if x >= EDGE else 0.0


def make(ground_height=ground, **changes):
    config = load_walker_config().replace(**changes) if changes else load_walker_config()
    left, right = FootPose(np.array([0.0, 0.1, 0.0])), FootPose(np.array([0.0, -0.1, 0.0]))
    return PatternGenerator(config, left, right, np.array([0.0, 0.0, 0.88]), SOLE, SOLE, ground_height)


def walk(gen, steps=8, vx=0.25):
    gen.walk_steps(steps, vx)
    refs = []
    t = 0.0
    gen.cycle(t)
    end = gen.schedule.end_time + 0.2
    while t < end:
        refs.append(gen.cycle(t))
        t += gen.config.dt
    return refs


def test_footsteps_on_the_platform_get_its_height_and_never_straddle_the_edge():
    gen = make()
    gen.walk_steps(8, 0.25)
    gen.cycle(0.0)
    steps = gen.schedule.steps
    margin = gen.config.edge_margin
    for s in steps:
        toe, heel = s.position[0] + SOLE.x_max, s.position[0] + SOLE.x_min
        assert toe <= EDGE - margin + 1e-9 or heel >= EDGE + margin - 1e-9, s
        assert s.position[2] == pytest.approx(HEIGHT if heel >= EDGE else 0.0)
    final = gen.schedule.final_feet
    assert all(final[side].position[2] == pytest.approx(HEIGHT) for side in ("left", "right"))
    # the step onto the platform is made longer than the nominal 0.2 m, within the limit
    dx = [b.position[0] - a.position[0] for a, b in zip(steps, steps[1:])]
    assert max(dx) > 0.25 and max(dx) <= gen.config.max_step_length + 1e-9


def test_flat_ground_without_terrain_keeps_the_stance_height():
    gen = make(ground_height=None)
    gen.walk_steps(6, 0.25)
    gen.cycle(0.0)
    assert all(s.position[2] == 0.0 for s in gen.schedule.steps)


def test_a_platform_out_of_reach_stops_the_feet_before_its_edge():
    gen = make(max_step_length=0.2)  # the step onto the platform needs 0.2 + 2 * 0.05 m at least
    gen.walk_steps(8, 0.25)
    gen.cycle(0.0)
    for s in gen.schedule.steps:
        assert s.position[2] == 0.0 and s.position[0] + SOLE.x_max <= EDGE - gen.config.edge_margin + 1e-9


def test_swing_clears_the_edge_and_lands_at_rest():
    gen = make()
    refs = walk(gen)
    h = gen.config.step_height
    for side in ("left", "right"):
        swing = [r for r in refs if not r.feet[side].in_contact]
        for r in swing:
            f = r.feet[side]
            toe, heel = f.pos[0] + SOLE.x_max, f.pos[0] + SOLE.x_min
            if toe >= EDGE and heel <= EDGE:  # the sole is above the edge
                assert f.pos[2] > HEIGHT + 0.015, (r.time, f.pos)
        # apex of the step onto the platform: step_height above the platform
        landing_on_platform = [r for r in swing if r.upcoming_footsteps and r.upcoming_footsteps[0].position[2] > 0]
        if landing_on_platform:
            assert max(r.feet[side].pos[2] for r in landing_on_platform) >= HEIGHT + h - 1e-6
    for prev, r in zip(refs, refs[1:]):
        for side in ("left", "right"):
            if r.feet[side].in_contact and not prev.feet[side].in_contact:  # touchdown
                assert np.linalg.norm(prev.feet[side].lin_vel) < 1e-2
                assert r.feet[side].pos[2] == pytest.approx(ground(r.feet[side].pos[0] + SOLE.x_min, 0.0))


def test_com_height_rises_with_the_support_continuously():
    gen = make()
    refs = walk(gen)
    z = np.array([r.com_pos[2] for r in refs])
    vz = np.array([r.com_vel[2] for r in refs])
    assert z[-1] - z[0] == pytest.approx(HEIGHT, abs=1e-9)
    assert np.max(np.abs(np.diff(z))) < 2e-4  # no jump (1 ms ticks, 0.2 m/s at most)
    assert np.max(np.abs(np.diff(vz))) < 2e-3
    dt = gen.config.dt
    assert np.allclose(np.diff(z) / dt, 0.5 * (vz[1:] + vz[:-1]), atol=1e-3)
    assert np.max(np.abs([r.com_acc[2] for r in refs])) < 2.0  # [m/s^2], a gentle rise
    assert np.all(np.diff(z) >= -1e-12)  # rising only
    # the ZMP reference height is the support height
    assert refs[-1].zmp_ref[2] == pytest.approx(HEIGHT)


def _level_changes(schedule):
    """Indices of the steps whose swing foot lands at another height than it lifts off."""
    return [
        k
        for k, s in enumerate(schedule.steps)
        if abs(s.position[2] - schedule.feet_before[k][s.side].position[2]) > 1e-3
    ]


def test_steps_between_two_levels_last_longer():
    factor = 1.5
    gen = make(level_change_duration_factor=factor)
    gen.walk_steps(8, 0.25)
    gen.cycle(0.0)
    sched, cfg = gen.schedule, gen.config
    changes = _level_changes(sched)
    assert len(changes) == 2  # the leading and the trailing foot onto the platform
    steps = sched.steps
    for k, s in enumerate(steps):
        T = cfg.step_duration * (factor if k in changes else 1.0)
        assert s.t_end - s.t_start == pytest.approx((1.0 - cfg.double_support_ratio) * T)
        if k + 1 < len(steps):  # the double support after it is longer too
            assert steps[k + 1].t_start - s.t_start == pytest.approx(T)
    # the phases tile the timeline
    for a, b in zip(sched.phases, sched.phases[1:]):
        assert a.t_end == pytest.approx(b.t_start)
    # on flat ground nothing changes
    flat = make(ground_height=None, level_change_duration_factor=factor)
    flat.walk_steps(8, 0.25)
    flat.cycle(0.0)
    t_first = flat.schedule.t0 + cfg.start_duration
    for k, s in enumerate(flat.schedule.steps):
        assert s.t_start == pytest.approx(t_first + k * cfg.step_duration)


def _com_z_at_mid_swing(gen, refs, k):
    s = gen.schedule.steps[k]
    t_mid = 0.5 * (s.t_start + s.t_end)
    return min(refs, key=lambda r: abs(r.time - t_mid)).com_pos[2]


def test_com_rises_once_the_trailing_foot_leaves_the_floor():
    """On a step up the support height of the trailing foot's step is the floor (the lowest
    foot of the step): the trailing leg is not stretched by a CoM already raised above the
    leading foot; the CoM reaches the platform height during the next step."""
    gen = make()
    refs = walk(gen)
    lead, trail = _level_changes(gen.schedule)
    assert trail == lead + 1
    z_c = gen.com_height
    assert _com_z_at_mid_swing(gen, refs, lead) == pytest.approx(z_c)
    assert _com_z_at_mid_swing(gen, refs, trail) == pytest.approx(z_c)
    assert _com_z_at_mid_swing(gen, refs, trail + 1) == pytest.approx(z_c + HEIGHT)


def test_com_lowers_while_the_leading_foot_steps_down():
    def down(x, y):  # start on a 5 cm platform, floor beyond EDGE
        return 0.0 if x >= EDGE else HEIGHT

    config = load_walker_config()
    left, right = FootPose(np.array([0.0, 0.1, HEIGHT])), FootPose(np.array([0.0, -0.1, HEIGHT]))
    gen = PatternGenerator(config, left, right, np.array([0.0, 0.0, 0.88 + HEIGHT]), SOLE, SOLE, down)
    refs = walk(gen)
    lead, trail = _level_changes(gen.schedule)
    z_c = gen.com_height
    assert _com_z_at_mid_swing(gen, refs, lead - 1) == pytest.approx(z_c + HEIGHT)
    assert _com_z_at_mid_swing(gen, refs, lead) == pytest.approx(z_c)
    assert _com_z_at_mid_swing(gen, refs, trail) == pytest.approx(z_c)
    assert all(s.position[2] == 0.0 for s in gen.schedule.steps[lead:])
