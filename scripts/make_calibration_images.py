"""ImageNet-style inputs from the sample photographs in scikit-image's wheel (pinned), for
calibrating and checking int8 ResNet-50 (`smelt quantize --calibrate DIR`).

    $SMELT_CACHE/peers-venv/bin/python scripts/make_calibration_images.py [OUT_DIR]

Downloads scikit-image 0.25.2's wheel once (pip, no install) into $SMELT_CACHE/wheels,
decodes its 26 bundled images with Pillow (grayscale ones repeated to RGB), resizes the
short side to 256, crops the centre 224x224 and normalizes with the ImageNet mean and
standard deviation, writing OUT_DIR/<image>.npy as float32 [1, 3, 224, 224] (default
$SMELT_CACHE/data/calibration/images).
"""

import glob
import io
import os
import subprocess
import sys
import zipfile

import numpy as np
from PIL import Image

CACHE = os.environ.get("SMELT_CACHE", os.path.expanduser("~/.cache/smelt"))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(CACHE, "data", "calibration", "images")
WHEELS = os.path.join(CACHE, "wheels")
PIN = "scikit-image==0.25.2"

wheel = sorted(glob.glob(os.path.join(WHEELS, "scikit_image-0.25.2-*.whl")))
if not wheel:
    os.makedirs(WHEELS, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", PIN, "--no-deps", "--only-binary=:all:", "-d", WHEELS],
        check=True,
    )
    wheel = sorted(glob.glob(os.path.join(WHEELS, "scikit_image-0.25.2-*.whl")))
os.makedirs(OUT, exist_ok=True)
mean = np.array([0.485, 0.456, 0.406], np.float32).reshape(3, 1, 1)
std = np.array([0.229, 0.224, 0.225], np.float32).reshape(3, 1, 1)
with zipfile.ZipFile(wheel[0]) as z:
    names = sorted(n for n in z.namelist() if n.startswith("skimage/data/") and n.endswith((".png", ".jpg")))
    for n in names:
        img = Image.open(io.BytesIO(z.read(n))).convert("RGB")
        w, h = img.size
        s = 256 / min(w, h)
        img = img.resize((max(224, round(w * s)), max(224, round(h * s))), Image.BILINEAR)
        w, h = img.size
        left, top = (w - 224) // 2, (h - 224) // 2
        img = img.crop((left, top, left + 224, top + 224))
        x = np.asarray(img, np.float32).transpose(2, 0, 1) / 255.0
        x = ((x - mean) / std)[None].astype(np.float32)
        stem = os.path.splitext(os.path.basename(n))[0]
        np.save(os.path.join(OUT, f"{stem}.npy"), x)
print(f"{len(names)} images in {OUT}")
