"""Offscreen video of a run: MuJoCo frames at ``fps`` from a camera that follows the robot.

Frames go to an MP4 (H.264) through the ffmpeg binary shipped by the
``imageio-ffmpeg`` wheel, as they are rendered (nothing is kept in memory).
Without ``imageio-ffmpeg`` the frames are kept at half size, quantized to 256
colours, and written as an animated GIF with Pillow (a matplotlib dependency).

Rendering uses its own ``mujoco.Renderer`` with shadows and reflections off
(four times faster with a software GL); ``$MUJOCO_GL`` chooses the backend
(``egl`` or ``osmesa``, see :mod:`whole_body_control.sim`).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import mujoco
import numpy as np


def mp4_available() -> bool:
    try:
        import imageio_ffmpeg  # noqa: F401
    except ImportError:
        return False
    return True


class VideoRecorder:
    """Renders ``sim`` every ``1 / fps`` [s] of simulated time; ``write(stem)`` saves the video.

    Args:
        fps: frames per simulated second [Hz].
        size: (width, height) [px].
        azimuth, elevation: camera angles [deg]; the camera looks at the base (its
            horizontal position, low-pass filtered over ``smoothing`` [s]) at a fixed height.
    """

    def __init__(
        self,
        fps: float = 30.0,
        size: tuple[int, int] = (640, 480),
        azimuth: float = 150.0,
        elevation: float = -12.0,
        smoothing: float = 0.3,
    ):
        if fps <= 0:
            raise ValueError(f"fps must be > 0 [Hz], got {fps}")
        self.fps = float(fps)
        self.size = (int(size[0]) // 16 * 16, int(size[1]) // 16 * 16)  # H.264 macro blocks
        self.azimuth, self.elevation, self.smoothing = azimuth, elevation, smoothing
        self.frames = 0
        self._next_t = 0.0
        self._renderer: mujoco.Renderer | None = None
        self._camera: mujoco.MjvCamera | None = None
        self._last_t = 0.0
        self._tmp = Path(tempfile.mkdtemp(prefix="wbc_video_"))
        self._mp4 = mp4_available()
        self._writer = None
        self._gif_frames: list = []

    @property
    def suffix(self) -> str:
        return ".mp4" if self._mp4 else ".gif"

    def _start(self, sim) -> None:
        width, height = self.size
        model = sim.model
        model.vis.global_.offwidth = max(model.vis.global_.offwidth, width)
        model.vis.global_.offheight = max(model.vis.global_.offheight, height)
        self._renderer = mujoco.Renderer(model, height=height, width=width)
        for flag in (mujoco.mjtRndFlag.mjRND_SHADOW, mujoco.mjtRndFlag.mjRND_REFLECTION):
            self._renderer.scene.flags[flag] = 0
        base = sim.data.site_xpos[sim.imu_site]
        cam = mujoco.MjvCamera()
        cam.type = mujoco.mjtCamera.mjCAMERA_FREE
        cam.lookat[:] = [base[0], base[1], 0.7 * base[2]]
        cam.distance = 2.2 * float(base[2]) + 1.0
        cam.azimuth, cam.elevation = self.azimuth, self.elevation
        self._camera = cam
        if self._mp4:
            import imageio_ffmpeg

            self._writer = imageio_ffmpeg.write_frames(
                str(self._tmp / "video.mp4"),
                (width, height),
                fps=self.fps,
                codec="libx264",
                pix_fmt_out="yuv420p",
                quality=6,
                macro_block_size=16,
                ffmpeg_log_level="error",
            )
            self._writer.send(None)

    def tick(self, t: float, sim) -> None:
        """Render a frame if one is due at simulated time ``t`` [s]."""
        if t + 1e-9 < self._next_t:
            return
        if self._renderer is None:
            self._start(sim)
        cam = self._camera
        base = sim.data.site_xpos[sim.imu_site]
        alpha = min(1.0, (t - self._last_t) / self.smoothing) if self.smoothing > 0 else 1.0
        cam.lookat[:2] += alpha * (base[:2] - cam.lookat[:2])
        self._last_t = t
        self._renderer.update_scene(sim.data, camera=cam)
        frame = self._renderer.render()
        if self._writer is not None:
            self._writer.send(np.ascontiguousarray(frame))
        else:
            from PIL import Image

            image = Image.fromarray(frame).resize((self.size[0] // 2, self.size[1] // 2))
            self._gif_frames.append(image.quantize(colors=256))
        self.frames += 1
        self._next_t += 1.0 / self.fps

    def write(self, path_without_suffix: Path) -> Path | None:
        """Finish the video at ``path_without_suffix`` + ``.mp4`` (or ``.gif``); ``None`` without frames."""
        self.close()
        if self.frames == 0:
            shutil.rmtree(self._tmp, ignore_errors=True)
            return None
        path = Path(path_without_suffix).with_suffix(self.suffix)
        path.parent.mkdir(parents=True, exist_ok=True)
        if self._mp4:
            shutil.move(str(self._tmp / "video.mp4"), path)
        else:
            first, *rest = self._gif_frames
            first.save(path, save_all=True, append_images=rest, duration=round(1000 / self.fps), loop=0)
            self._gif_frames.clear()
        shutil.rmtree(self._tmp, ignore_errors=True)
        return path

    def close(self) -> None:
        """Release the renderer and the encoder (the video is kept until :meth:`write`)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
