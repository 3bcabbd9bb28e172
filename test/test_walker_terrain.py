"""zmp_walker on uneven ground: footstep heights from a terrain map, swing clearance
over a step edge, CoM height following the support."""

import math

import numpy as np
import pytest

from zmp_walker import FootPose, PatternGenerator, SoleRect, load_walker_config
from zmp_walker.generator import MeasuredState

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


def _com_z_at(refs, t):
    return min(refs, key=lambda r: abs(r.time - t)).com_pos[2]


def test_com_rises_once_the_trailing_foot_leaves_the_floor():
    """On a step up the support height is the floor until the trailing foot lifts off (the
    trailing leg is not stretched by a CoM already raised above the leading foot), then rises
    during its swing (the trailing leg, its foot well behind the hips, is not bent so much
    that its ankle stops the foot below the edge); it is the platform's at its touchdown."""
    gen = make()
    refs = walk(gen)
    lead, trail = _level_changes(gen.schedule)
    assert trail == lead + 1
    z_c = gen.com_height
    s = gen.schedule.steps[trail]
    assert _com_z_at_mid_swing(gen, refs, lead) == pytest.approx(z_c)
    assert _com_z_at(refs, s.t_start) == pytest.approx(z_c)
    assert z_c < _com_z_at_mid_swing(gen, refs, trail) < z_c + HEIGHT
    assert _com_z_at(refs, s.t_end) == pytest.approx(z_c + HEIGHT)
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


# -- stairs: 10 cm risers, two footsteps per tread ------------------------------------------

RISER, TREAD, FIRST_EDGE = 0.10, 0.52, 0.76  # Talos-size treads (wbc scenarios stairs_*_10cm)
STAIR_EDGES = (FIRST_EDGE, FIRST_EDGE + TREAD)


def stairs_up(x, y):
    return RISER * sum(x >= e for e in STAIR_EDGES)


def stairs_down(x, y):  # start on the 20 cm top, the floor beyond the last edge
    return RISER * sum(x < e for e in STAIR_EDGES)


def make_on(terrain, **changes):
    config = load_walker_config().replace(**changes) if changes else load_walker_config()
    z0 = terrain(0.0, 0.0)
    left, right = FootPose(np.array([0.0, 0.1, z0])), FootPose(np.array([0.0, -0.1, z0]))
    return PatternGenerator(config, left, right, np.array([0.0, 0.0, 0.88 + z0]), SOLE, SOLE, terrain)


@pytest.mark.parametrize("terrain, final_z", [(stairs_up, 2 * RISER), (stairs_down, 0.0)], ids=["up", "down"])
def test_stair_footsteps_follow_the_terrain_one_level_at_a_time(terrain, final_z):
    gen = make_on(terrain)
    gen.walk_steps(8, 0.25)
    gen.cycle(0.0)
    margin = gen.config.edge_margin
    before = gen.schedule.feet_before
    for k, s in enumerate(gen.schedule.steps):
        heel, toe = s.position[0] + SOLE.x_min, s.position[0] + SOLE.x_max
        assert all(toe <= e - margin + 1e-9 or heel >= e + margin - 1e-9 for e in STAIR_EDGES), s
        assert s.position[2] == pytest.approx(terrain(heel, 0.0))
        # no foot skips a tread
        assert abs(s.position[2] - before[k][s.side].position[2]) <= RISER + 1e-9
    zs = [s.position[2] for s in gen.schedule.steps]
    assert zs == sorted(zs, reverse=terrain is stairs_down)
    assert all(f.position[2] == pytest.approx(final_z) for f in gen.schedule.final_feet.values())


@pytest.mark.parametrize("terrain", [stairs_up, stairs_down], ids=["up", "down"])
def test_the_swinging_sole_stays_above_the_stairs(terrain):
    """The swing foot's reference never puts its sole into a step: on a step up it rises
    above the upper level before its toe passes the edge, on a step down its heel passes
    the edge before it goes below the upper level."""
    gen = make_on(terrain)
    refs = walk(gen)
    for side in ("left", "right"):
        for r in refs:
            f = r.feet[side]
            if f.in_contact:
                continue
            xs = np.linspace(f.pos[0] + SOLE.x_min, f.pos[0] + SOLE.x_max, 41)
            under = [terrain(x, f.pos[1]) for x in xs]
            assert f.pos[2] >= max(under) - 1e-9, (side, r.time, f.pos)
            if max(under) > min(under):  # the sole is over an edge
                assert f.pos[2] >= max(under) + 0.01, (side, r.time, f.pos)
    assert refs[-1].com_pos[2] == pytest.approx(gen.com_height + terrain(10.0, 0.0))


def _lagging_step_down(gen):
    """The lowest heel x [m] of the first step down's landing while the measured CoM lags 6 cm
    behind the plan during its swing."""
    gen.walk_steps(8, 0.25)
    gen.cycle(0.0)
    lead = _level_changes(gen.schedule)[0]
    step = gen.schedule.steps[lead]
    t, heel = 0.0, math.inf
    ref = gen.cycle(t)
    while t < step.t_end - 0.05:
        lag = np.array([-0.06, 0.0, 0.0]) if t > step.t_start else np.zeros(3)
        ref = gen.cycle(t, MeasuredState(ref.com_pos + lag, ref.com_vel))
        heel = min(heel, gen.schedule.steps[lead].position[0] + SOLE.x_min)
        t += gen.config.dt
    return heel


def test_step_adjustment_keeps_a_landing_off_the_stair_edge(monkeypatch):
    """A CoM lagging behind the plan on a step down asks the capture-point rule to land the
    foot further back; the move is cut so that the heel stays ``edge_margin`` beyond the edge
    (without the cut it lands on the edge)."""
    gen = make_on(stairs_down)
    assert _lagging_step_down(gen) >= FIRST_EDGE + gen.config.edge_margin - 1e-9
    monkeypatch.setattr(PatternGenerator, "_levels_kept", lambda *a, **k: True)
    assert _lagging_step_down(make_on(stairs_down)) < FIRST_EDGE + gen.config.edge_margin - 0.01
