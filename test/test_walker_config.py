"""config/walker.yaml -> WalkerConfig: defaults, robot overlays, validation errors."""

import textwrap

import pytest

from zmp_walker.config import WalkerConfig, load_walker_config
from zmp_walker.errors import ConfigError


def write(tmp_path, text):
    path = tmp_path / "walker.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_repository_file_loads_for_every_robot():
    base = load_walker_config()
    assert isinstance(base, WalkerConfig)
    assert base.step_duration == pytest.approx(0.8)
    assert base.method in ("preview", "mpc")
    g1 = load_walker_config(robot="g1")
    assert g1.step_duration < base.step_duration
    assert g1.max_step_length < base.max_step_length
    assert g1.preview == base.preview  # nested values not overridden are inherited
    talos = load_walker_config(robot="talos")
    assert talos.fast_gait.enabled and not base.fast_gait.enabled
    assert talos.step_adjustment.min_swing_duration_stance_side < base.step_adjustment.min_swing_duration
    assert talos.step_adjustment.max_adjustment == base.step_adjustment.max_adjustment  # merged, not replaced
    # Talos: the base values, its fast gait and its push-recovery limits
    same = talos.replace(
        fast_gait=base.fast_gait, max_step_width=base.max_step_width, step_adjustment=base.step_adjustment
    )
    assert same == base


def test_overlay_merges_nested_sections(tmp_path):
    path = write(
        tmp_path,
        """
        mpc: {horizon_steps: 20, period: 0.05}
        robots:
          small: {mpc: {period: 0.08}}
    """,
    )
    cfg = load_walker_config(path, robot="small")
    assert cfg.mpc.horizon_steps == 20 and cfg.mpc.period == pytest.approx(0.08)


def test_unknown_key_names_file_key_and_suggestion(tmp_path):
    path = write(tmp_path, "step_duraton: 0.7\n")
    with pytest.raises(ConfigError) as info:
        load_walker_config(path)
    msg = str(info.value)
    assert str(path) in msg and "step_duraton" in msg and "did you mean 'step_duration'" in msg


def test_unknown_key_inside_robot_overlay(tmp_path):
    path = write(tmp_path, "robots:\n  g1: {max_step_lenght: 0.1}\n")
    with pytest.raises(ConfigError, match=r"robots\.g1\.max_step_lenght.*max_step_length"):
        load_walker_config(path)


def test_unknown_robot(tmp_path):
    path = write(tmp_path, "robots:\n  talos: {}\n")
    with pytest.raises(ConfigError, match="talso.*talos"):
        load_walker_config(path, robot="talso")


@pytest.mark.parametrize(
    "text, key",
    [
        ("step_duration: -0.8\n", "step_duration"),
        ("double_support_ratio: 1.5\n", "double_support_ratio"),
        ("double_support_ratio: 0.0\n", "double_support_ratio"),
        ("k_dcm: 0.5\n", "k_dcm"),
        ("method: zmp\n", "method"),
        ("preview: {r: -1.0}\n", "preview.r"),
        ("min_step_width: 0.5\n", "min_step_width"),
    ],
)
def test_invalid_values_name_file_and_key(tmp_path, text, key):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_walker_config(path)
    assert str(path) in str(info.value) and key in str(info.value)
