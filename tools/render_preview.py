"""Render a preview of a (baked) .blend headless: a strip/grid of frames as one PNG, plus an animation.

    .venv/bin/python tools/render_preview.py out/demo/dice_baked.blend --frames 1 40 80 120 250 \\
        --strip out/demo/dice_strip.png --gif out/demo/dice.gif --mp4 out/demo/dice.mp4

Rendering uses Cycles on the CPU (the bpy module has no GL context here, so EEVEE and Workbench are
not reliable headless) at a low resolution and sample count with denoising, which costs a few
seconds per frame on 2 cores. Each frame carries its frame number (Blender's render stamp).

The strip is assembled with Blender's own image API, so it needs nothing beyond the bpy module.
The GIF needs Pillow (``pip install pillow``); without it the GIF is skipped with a message.
The MP4 is encoded by Blender's built-in FFmpeg through the sequencer.
"""
from __future__ import annotations

import argparse
import contextlib
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def _bpy():
    import bpy

    return bpy


def open_blend(path) -> None:
    bpy = _bpy()
    with quiet_stdout():
        bpy.ops.wm.open_mainfile(filepath=str(Path(path).resolve()), load_ui=False)


def configure_render(scene, width: int, height: int, samples: int, label: str = "") -> None:
    """Fast Cycles CPU settings and a frame-number stamp."""
    bpy = _bpy()
    scene.render.engine = "CYCLES"
    cycles = scene.cycles
    cycles.device = "CPU"
    cycles.samples = samples
    cycles.use_adaptive_sampling = False
    cycles.max_bounces = 3
    cycles.diffuse_bounces = 2
    cycles.glossy_bounces = 1
    cycles.transmission_bounces = 0
    cycles.transparent_max_bounces = 0
    cycles.volume_bounces = 0
    if getattr(bpy.app.build_options, "openimagedenoise", False):
        cycles.use_denoising = True
        cycles.denoiser = "OPENIMAGEDENOISE"
        cycles.denoising_input_passes = "RGB_ALBEDO_NORMAL"
        cycles.denoising_prefilter = "FAST"
    else:
        cycles.use_denoising = False
    render = scene.render
    render.resolution_x = width
    render.resolution_y = height
    render.resolution_percentage = 100
    render.use_persistent_data = True  # keep the BVH between frames where possible
    render.film_transparent = False
    render.image_settings.file_format = "PNG"
    render.image_settings.color_mode = "RGB"
    # burn the frame number (and a label) into each image
    render.use_stamp = True
    for attr in dir(render):
        if attr.startswith("use_stamp_") and attr not in ("use_stamp_note", "use_stamp_frame",
                                                          "use_stamp_labels"):
            try:
                setattr(render, attr, False)
            except (AttributeError, TypeError):
                pass
    render.use_stamp_frame = True
    render.use_stamp_labels = True
    render.use_stamp_note = bool(label)
    if label:
        render.stamp_note_text = label
    render.stamp_font_size = max(10, height // 20)
    render.stamp_foreground = (1, 1, 1, 1)
    render.stamp_background = (0, 0, 0, 0.45)


@contextlib.contextmanager
def quiet_stdout():
    """Silence Blender's per-frame render chatter ("Fra:", "Saved:") on the process's stdout."""
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


def render_frames(frames, out_dir, width=480, height=270, samples=8, label="", log=print) -> dict:
    """Render the open file's camera at each frame into out_dir/frame_NNNN.png; {frame: path}."""
    bpy = _bpy()
    scene = bpy.context.scene
    if scene.camera is None:
        raise RuntimeError("the scene has no camera")
    configure_render(scene, width, height, samples, label)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    for k, frame in enumerate(sorted(set(int(f) for f in frames))):
        start = time.perf_counter()
        scene.frame_set(frame)
        path = out_dir / f"frame_{frame:04d}.png"
        scene.render.filepath = str(path)
        with quiet_stdout():
            bpy.ops.render.render(write_still=True)
        if not path.exists():
            raise RuntimeError(f"rendering frame {frame} wrote no image")
        paths[frame] = path
        log(f"  rendered frame {frame} ({k + 1}/{len(set(frames))}) in {time.perf_counter() - start:.1f} s")
    return paths


def load_pixels(path) -> np.ndarray:
    """(H, W, 4) float RGBA of a PNG as stored (sRGB values), top row first."""
    bpy = _bpy()
    img = bpy.data.images.load(str(path), check_existing=False)
    try:
        w, h = img.size
        px = np.empty(w * h * 4, dtype=np.float32)
        img.pixels.foreach_get(px)
    finally:
        bpy.data.images.remove(img)
    return px.reshape(h, w, 4)[::-1]


def save_pixels(pixels: np.ndarray, path) -> Path:
    """Write (H, W, 4) float RGBA (top row first, sRGB values) as an 8-bit PNG."""
    bpy = _bpy()
    h, w, _ = pixels.shape
    img = bpy.data.images.new("prb_preview_strip", width=w, height=h, alpha=False, float_buffer=False)
    try:
        img.colorspace_settings.name = "sRGB"
        img.pixels.foreach_set(np.ascontiguousarray(pixels[::-1], dtype=np.float32).ravel())
        img.filepath_raw = str(path)
        img.file_format = "PNG"
        img.save()
    finally:
        bpy.data.images.remove(img)
    return Path(path)


def compose_grid(paths, out_path, columns=None, margin=6) -> Path:
    """Lay frames out left to right (``columns`` per row; default: all in one row) on a white sheet."""
    images = [load_pixels(p) for p in paths]
    h, w, _ = images[0].shape
    columns = columns or len(images)
    rows = math.ceil(len(images) / columns)
    sheet = np.ones((rows * h + (rows + 1) * margin, columns * w + (columns + 1) * margin, 4), dtype=np.float32)
    for k, im in enumerate(images):
        r, c = divmod(k, columns)
        y, x = margin + r * (h + margin), margin + c * (w + margin)
        sheet[y:y + h, x:x + w] = im[:h, :w]
    sheet[..., 3] = 1.0
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    return save_pixels(sheet, out_path)


def write_gif(paths, out_path, fps=12.0, log=print) -> Path | None:
    """Animated GIF of the frames with Pillow; None (and a message) when Pillow is missing."""
    try:
        from PIL import Image
    except ImportError:
        log("  GIF skipped: Pillow is not installed (pip install pillow)")
        return None
    frames = [Image.open(p).convert("RGB") for p in paths]
    # one shared palette keeps the file small and the colours steady between frames
    palette = frames[len(frames) // 2].quantize(colors=128, method=Image.Quantize.MEDIANCUT)
    quantized = [f.quantize(palette=palette, dither=Image.Dither.NONE) for f in frames]
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    durations = [int(round(1000 / fps))] * len(quantized)
    durations[-1] = 1200  # rest on the last frame before looping
    quantized[0].save(out_path, save_all=True, append_images=quantized[1:], duration=durations, loop=0,
                      optimize=True, disposal=1)
    return out_path


def write_mp4(paths, out_path, fps=24, log=print) -> Path | None:
    """H.264 MP4 of the frames, encoded by Blender's FFmpeg through the sequencer; None if it fails."""
    bpy = _bpy()
    paths = [Path(p) for p in paths]
    folder = paths[0].parent
    scene = bpy.data.scenes.new("prb_preview_movie")
    try:
        editor = scene.sequence_editor_create()
        strips = editor.strips if hasattr(editor, "strips") else editor.sequences  # "strips" since Blender 4.4
        strip = strips.new_image(name="frames", filepath=str(paths[0]), channel=1, frame_start=1)
        for p in paths[1:]:
            if p.parent != folder:
                raise ValueError("all frames must be in one folder")
            strip.elements.append(p.name)
        h, w, _ = load_pixels(paths[0]).shape
        scene.frame_start, scene.frame_end = 1, len(paths)
        scene.render.fps, scene.render.fps_base = int(fps), 1.0
        scene.render.resolution_x, scene.render.resolution_y = w - (w % 2), h - (h % 2)
        scene.render.resolution_percentage = 100
        scene.render.use_stamp = False
        settings = scene.render.image_settings
        if hasattr(settings, "media_type"):  # Blender 5: image / multilayer / video
            settings.media_type = "VIDEO"
        settings.file_format = "FFMPEG"
        ff = scene.render.ffmpeg
        ff.format = "MPEG4"
        ff.codec = "H264"
        ff.constant_rate_factor = "MEDIUM"
        out_path = Path(out_path).resolve()
        out_path.parent.mkdir(parents=True, exist_ok=True)
        scene.render.filepath = str(out_path)
        scene.render.use_file_extension = False
        window_scene = bpy.context.scene
        with bpy.context.temp_override(scene=scene), quiet_stdout():
            bpy.ops.render.render(animation=True, scene=scene.name)
        del window_scene
        if not out_path.exists() or out_path.stat().st_size == 0:
            raise RuntimeError("no file written")
        return out_path
    except Exception as exc:  # noqa: BLE001 - the movie is optional
        log(f"  MP4 skipped: {exc}")
        return None
    finally:
        bpy.data.scenes.remove(scene)


def animation_frames(first: int, last: int, count: int) -> list[int]:
    """About ``count`` frames spread evenly from first to last (both included)."""
    if last <= first or count <= 1:
        return [first]
    step = max(1, round((last - first) / (count - 1)))
    frames = list(range(first, last + 1, step))
    if frames[-1] != last:
        frames.append(last)
    return frames


def make_preview(blend, strip, frames, gif=None, mp4=None, animation_count=30, width=480, height=270,
                 samples=8, columns=None, anim_width=None, anim_height=None, label="", keep_frames=None,
                 animation_range=None, log=print) -> dict:
    """Render ``frames`` into a strip PNG, and (optionally) an animation over ``animation_range``
    (first, last) frames, by default the scene's frame range.

    Returns {'strip': path, 'gif': path|None, 'mp4': path|None, 'seconds': float, 'frames': [...]}.
    """
    bpy = _bpy()
    start = time.perf_counter()
    open_blend(blend)
    scene = bpy.context.scene
    work = Path(keep_frames) if keep_frames else Path(tempfile.mkdtemp(prefix="prb_preview_"))
    result = dict(strip=None, gif=None, mp4=None, frames=list(frames))
    try:
        log(f"rendering {len(frames)} frames for the strip ({width}x{height}, {samples} samples, Cycles CPU)")
        stills = render_frames(frames, work / "strip", width, height, samples, label, log=log)
        result["strip"] = compose_grid([stills[f] for f in sorted(stills)], strip, columns=columns)
        if gif or mp4:
            aw, ah = anim_width or width * 2 // 3, anim_height or height * 2 // 3
            first, last = animation_range or (scene.frame_start, scene.frame_end)
            aframes = animation_frames(first, last, animation_count)
            log(f"rendering {len(aframes)} frames for the animation ({aw}x{ah})")
            anim = render_frames(aframes, work / "anim", aw, ah, samples, label, log=log)
            ordered = [anim[f] for f in aframes]
            fps = max(4.0, min(24.0, len(aframes) / 4.0))  # the whole range in about 4 s
            if gif:
                result["gif"] = write_gif(ordered, gif, fps=fps, log=log)
            if mp4:
                result["mp4"] = write_mp4(ordered, mp4, fps=round(fps), log=log)
    finally:
        if not keep_frames:
            shutil.rmtree(work, ignore_errors=True)
    result["seconds"] = time.perf_counter() - start
    return result


def make_overview(items, out_path, width=320, height=180, samples=8, log=print) -> Path:
    """One sheet with a row per .blend: ``items`` is a list of (blend path, [frames], label)."""
    work = Path(tempfile.mkdtemp(prefix="prb_overview_"))
    try:
        paths, columns = [], max(len(frames) for _, frames, _ in items)
        for k, (blend, frames, label) in enumerate(items):
            open_blend(blend)
            stills = render_frames(frames, work / f"row{k}", width, height, samples, label, log=log)
            row = [stills[f] for f in sorted(stills)]
            paths += row + [row[-1]] * (columns - len(row))
        return compose_grid(paths, out_path, columns=columns)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv=None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv and argv[0] == "overview":
        p = argparse.ArgumentParser(description="A sheet with one row of frames per baked .blend")
        p.add_argument("overview")
        p.add_argument("--output", required=True)
        p.add_argument("--item", action="append", required=True, metavar="BLEND:F1,F2,...[:LABEL]")
        p.add_argument("--width", type=int, default=320)
        p.add_argument("--height", type=int, default=180)
        p.add_argument("--samples", type=int, default=8)
        args = p.parse_args(argv)
        items = []
        for item in args.item:
            blend, frames, *label = item.split(":")
            items.append((blend, [int(f) for f in frames.split(",")], label[0] if label else ""))
        print(f"overview: {make_overview(items, args.output, args.width, args.height, args.samples)}")
        return 0
    p = argparse.ArgumentParser(description="Render a strip of frames (and a GIF/MP4) of a .blend headless. "
                                            "'render_preview.py overview ...' makes a sheet of several files.")
    p.add_argument("blend")
    p.add_argument("--frames", type=int, nargs="+", default=[1, 40, 80, 120, 250])
    p.add_argument("--strip", required=True, help="output PNG")
    p.add_argument("--columns", type=int, help="frames per row (default: one row)")
    p.add_argument("--gif", help="output animated GIF (needs Pillow)")
    p.add_argument("--mp4", help="output MP4 (Blender's FFmpeg)")
    p.add_argument("--animation-frames", type=int, default=30, help="frames in the GIF/MP4")
    p.add_argument("--animation-range", type=int, nargs=2, metavar=("FIRST", "LAST"),
                   help="frames the GIF/MP4 spans (default: the scene's frame range)")
    p.add_argument("--width", type=int, default=480)
    p.add_argument("--height", type=int, default=270)
    p.add_argument("--samples", type=int, default=8)
    p.add_argument("--label", default="", help="text stamped on every frame")
    p.add_argument("--keep-frames", help="folder to keep the single rendered frames in")
    args = p.parse_args(argv)
    res = make_preview(args.blend, args.strip, args.frames, gif=args.gif, mp4=args.mp4,
                       animation_count=args.animation_frames, width=args.width, height=args.height,
                       samples=args.samples, columns=args.columns, label=args.label, keep_frames=args.keep_frames,
                       animation_range=args.animation_range)
    for key in ("strip", "gif", "mp4"):
        if res[key]:
            print(f"{key}: {res[key]}")
    print(f"preview rendered in {res['seconds']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
