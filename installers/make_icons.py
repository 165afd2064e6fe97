"""Render installers/captioneer.svg into the icon files the Windows and macOS builds need.

    python installers/make_icons.py   # writes installers/build/captioneer.{png,ico,icns}

Uses Qt's own SVG renderer and ICO/ICNS writers, so no extra image tools are needed.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def render_icons(out_dir: Path, size: int = 256) -> list[Path]:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QGuiApplication, QImage, QImageWriter, QPainter
    from PySide6.QtSvg import QSvgRenderer

    _app = QGuiApplication.instance() or QGuiApplication([sys.argv[0]])  # painting needs one
    renderer = QSvgRenderer(str(HERE / "captioneer.svg"))
    if not renderer.isValid():
        raise SystemExit(f"error: cannot read {HERE / 'captioneer.svg'}")
    image = QImage(size, size, QImage.Format.Format_ARGB32)
    image.fill(Qt.GlobalColor.transparent)
    with_painter = QPainter(image)
    renderer.render(with_painter)
    with_painter.end()
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for suffix in ("png", "ico", "icns"):
        path = out_dir / f"captioneer.{suffix}"
        writer = QImageWriter(str(path), suffix.encode())
        if not writer.write(image):
            raise SystemExit(f"error: cannot write {path}: {writer.errorString()}")
        written.append(path)
    return written


if __name__ == "__main__":
    for icon in render_icons(HERE / "build"):
        print(icon)
