#!/usr/bin/python3
"""Unusual-input matrix, part 1: generates the inputs (run with /usr/bin/python3: PIL + numpy).

    /usr/bin/python3 tests/matrix/make_inputs.py OUT [--photos ../shared/data/imagenet-photos-500.tar.zst]

writes a class-per-folder tree OUT/inputs/<class>/<file>, one class per kind of input (jpeg-sampling,
jpeg-coding, jpeg-colour, jpeg-metadata, png, names, photos, bad), and returns/prints the case list.
Every file is made here from synthetic pixels (or taken from the shared photo archive); nothing is
committed. JPEGs come from libjpeg-turbo's own `cjpeg` / `jpegtran` (libjpeg-turbo-progs), from PIL,
or, for YCCK, from TurboJPEG through ctypes.
"""
import ctypes
import ctypes.util
import io
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import zlib
from dataclasses import dataclass, field

import numpy as np
from PIL import Image

W, H = 157, 101  # odd sizes: partial MCUs in both directions, longer than 64 for --max-resolution 64


@dataclass
class Case:
    name: str            # short id, unique
    cls: str             # class folder = kind of input
    path: bytes          # the file, as bytes (names may not be UTF-8)
    expect: str = "ok"   # "ok": must build; "error": must be refused naming the file
    exact: bool = True   # pass-through / raw store equals PIL's decode exactly (False: re-encoded, e.g. CMYK)
    tol: int = 0         # allowed max |diff| where `exact` (16-bit PNG: the 16->8 rounding rule)
    note: str = ""
    ref_mode: str = "pil"  # how the reference pixels are made (see run_matrix.reference_rgb)
    gray: bool = False     # a 1-channel JPEG source: the writer re-encodes it as a gray JPEG
    extra: dict = field(default_factory=dict)


def synthetic_rgb(w=W, h=H, seed=0):
    """A photo-like test card: smooth gradients (chroma upsampling matters), sharp edges and a
    saturated disc (clipping), plus mild noise; deterministic."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    r = 128 + 100 * np.sin(x / 9.0) * np.cos(y / 13.0)
    g = 255 * x / (w - 1)
    b = 255 * y / (h - 1)
    img = np.stack([r, g, b], axis=-1)
    img[(x // 16 + y // 16) % 2 == 0] *= 0.6  # checker edges
    disc = (x - w * 0.7) ** 2 + (y - h * 0.4) ** 2 < (min(w, h) * 0.18) ** 2
    img[disc] = [250, 20, 30]
    img += rng.normal(0, 4, img.shape)
    return np.clip(img + 0.5, 0, 255).astype(np.uint8)


def run(cmd, **kw):
    subprocess.run(cmd, check=True, **kw)


def cjpeg(ppm_path, out_path, *args):
    with open(out_path, "wb") as f:
        run(["cjpeg", "-quality", "90", *args, ppm_path], stdout=f)


def jpegtran(src, out_path, *args):
    with open(out_path, "wb") as f:
        run(["jpegtran", *args, src], stdout=f)


def ycck_jpeg(cmyk: np.ndarray, out_path) -> bool:
    """TurboJPEG compresses TJPF_CMYK pixels as a YCCK JPEG (Adobe marker, transform 2)."""
    name = ctypes.util.find_library("turbojpeg") or "libturbojpeg.so.0"
    try:
        tj = ctypes.CDLL(name)
    except OSError:
        return False
    tj.tjInitCompress.restype = ctypes.c_void_p
    tj.tjCompress2.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                               ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_ulong),
                               ctypes.c_int, ctypes.c_int, ctypes.c_int]
    tj.tjFree.argtypes = [ctypes.c_void_p]
    tj.tjDestroy.argtypes = [ctypes.c_void_p]
    h = tj.tjInitCompress()
    buf = ctypes.c_void_p()
    size = ctypes.c_ulong(0)
    px = np.ascontiguousarray(cmyk)
    TJPF_CMYK, TJSAMP_420 = 11, 2
    rc = tj.tjCompress2(h, px.ctypes.data, px.shape[1], 0, px.shape[0], TJPF_CMYK, ctypes.byref(buf),
                        ctypes.byref(size), TJSAMP_420, 90, 0)
    ok = rc == 0
    if ok:
        with open(out_path, "wb") as f:
            f.write(ctypes.string_at(buf, size.value))
    tj.tjFree(buf)
    tj.tjDestroy(h)
    return ok


def png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def write_png16(path, arr16: np.ndarray):
    """16-bit PNG (gray or RGB), written by hand: PIL cannot write 16-bit RGB."""
    h, w = arr16.shape[:2]
    ctype = 0 if arr16.ndim == 2 else 2
    raw = b"".join(b"\0" + arr16[y].astype(">u2").tobytes() for y in range(h))
    data = (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, ctype, 0, 0, 0)) +
            png_chunk(b"IDAT", zlib.compress(raw, 6)) + png_chunk(b"IEND", b""))
    with open(path, "wb") as f:
        f.write(data)


def make_12bit_sof(src: bytes) -> bytes:
    """The same baseline JPEG with its SOF0 precision byte changed from 8 to 12 (an SOF1 12-bit frame
    header would need 12-bit tables too; the point is a header libjpeg's 8-bit build refuses)."""
    b = bytearray(src)
    i = 2
    while i < len(b) - 4:
        assert b[i] == 0xFF, "marker expected"
        marker, seglen = b[i + 1], struct.unpack(">H", b[i + 2:i + 4])[0]
        if marker in (0xC0, 0xC1, 0xC2):
            b[i + 1] = 0xC1  # extended sequential, the SOF that may carry 12-bit samples
            b[i + 4] = 12
            return bytes(b)
        i += 2 + seglen
    raise RuntimeError("no SOF marker")


def with_sof_size(src: bytes, w: int, h: int) -> bytes:
    """The same JPEG with its frame header claiming w x h (the scan data stays that of the small image)."""
    b = bytearray(src)
    i = 2
    while i < len(b) - 4:
        marker, seglen = b[i + 1], struct.unpack(">H", b[i + 2:i + 4])[0]
        if marker in (0xC0, 0xC1, 0xC2):
            b[i + 5:i + 9] = struct.pack(">HH", h, w)
            return bytes(b)
        i += 2 + seglen
    raise RuntimeError("no SOF marker")


def png_bomb(path, w: int, h: int):
    """A valid-looking RGB PNG header claiming w x h, with the compressed data of only a few rows."""
    raw = (b"\0" + b"\x80" * (3 * w)) * 4
    data = (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
            png_chunk(b"IDAT", zlib.compress(raw, 9)) + png_chunk(b"IEND", b""))
    with open(path, "wb") as f:
        f.write(data)


def exif_orientation(value: int) -> bytes:
    ex = Image.Exif()
    ex[0x0112] = value
    return ex.tobytes()


def generate(out: str, photos_tar: str = "", n_photos: int = 3):
    root = os.path.join(out, "inputs")
    if os.path.exists(root):
        shutil.rmtree(root)
    tmp = os.path.join(out, "tmp")
    os.makedirs(tmp, exist_ok=True)
    cases = []

    def d(cls):
        p = os.path.join(root, cls)
        os.makedirs(p, exist_ok=True)
        return p

    def add(name, cls, fname, **kw):
        path = os.path.join(os.fsencode(d(cls)), fname if isinstance(fname, bytes) else os.fsencode(fname))
        c = Case(name=name, cls=cls, path=path, **kw)
        cases.append(c)
        return c

    rgb = synthetic_rgb()
    ppm = os.path.join(tmp, "card.ppm")
    Image.fromarray(rgb).save(ppm)
    gray_pgm = os.path.join(tmp, "card.pgm")
    Image.fromarray(rgb).convert("L").save(gray_pgm)

    # --- chroma subsampling, baseline and progressive (cjpeg: libjpeg-turbo's own encoder)
    jd = d("jpeg-sampling")
    for tag, sample in [("444", "1x1"), ("422", "2x1"), ("420", "2x2"), ("440", "1x2"), ("411", "4x1")]:
        cjpeg(ppm, os.path.join(jd, f"baseline_{tag}.jpg"), "-sample", sample)
        add(f"baseline_{tag}", "jpeg-sampling", f"baseline_{tag}.jpg")
        cjpeg(ppm, os.path.join(jd, f"progressive_{tag}.jpg"), "-sample", sample, "-progressive")
        add(f"progressive_{tag}", "jpeg-sampling", f"progressive_{tag}.jpg")
    cjpeg(gray_pgm, os.path.join(jd, "gray.jpg"))
    add("gray", "jpeg-sampling", "gray.jpg", gray=True, note="1-channel JPEG")
    cjpeg(gray_pgm, os.path.join(jd, "gray_progressive.jpg"), "-progressive")
    add("gray_progressive", "jpeg-sampling", "gray_progressive.jpg", gray=True)

    # --- entropy coding variants
    jc = d("jpeg-coding")
    cjpeg(ppm, os.path.join(jc, "restart_every_row.jpg"), "-sample", "2x2", "-restart", "1")
    add("restart_rows", "jpeg-coding", "restart_every_row.jpg", note="cjpeg -restart 1")
    cjpeg(ppm, os.path.join(jc, "restart_every_block.jpg"), "-sample", "1x1", "-restart", "1B")
    add("restart_blocks", "jpeg-coding", "restart_every_block.jpg", note="cjpeg -restart 1B")
    cjpeg(ppm, os.path.join(jc, "arithmetic.jpg"), "-sample", "2x2", "-arithmetic")
    add("arithmetic", "jpeg-coding", "arithmetic.jpg", note="cjpeg -arithmetic")
    jpegtran(os.path.join(jd, "progressive_420.jpg"), os.path.join(jc, "arithmetic_progressive.jpg"), "-arithmetic")
    add("arithmetic_progressive", "jpeg-coding", "arithmetic_progressive.jpg", note="jpegtran -arithmetic")
    cjpeg(ppm, os.path.join(jc, "optimized_q100.jpg"), "-sample", "1x1", "-optimize", "-quality", "100")
    add("optimized_q100", "jpeg-coding", "optimized_q100.jpg")

    # --- colour spaces: CMYK (PIL writes Adobe-inverted CMYK) and YCCK (TurboJPEG). Stored re-encoded.
    jcol = d("jpeg-colour")
    Image.fromarray(rgb).convert("CMYK").save(os.path.join(jcol, "cmyk.jpg"), quality=95)
    add("cmyk", "jpeg-colour", "cmyk.jpg", exact=False, note="re-encoded: compared by PSNR")
    cmyk = np.array(Image.fromarray(rgb).convert("CMYK"))
    # TurboJPEG takes the inverted (Adobe) values, as it returns them.
    if ycck_jpeg(255 - cmyk, os.path.join(jcol, "ycck.jpg")):
        add("ycck", "jpeg-colour", "ycck.jpg", exact=False, note="TurboJPEG YCCK; re-encoded")

    # --- metadata: EXIF orientation (ignored, like PIL / torchvision by default) and an ICC profile
    jm = d("jpeg-metadata")
    icc = b""
    try:
        from PIL import ImageCms
        icc = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    except Exception:  # noqa: BLE001 - no littlecms: a fake but well-formed-enough APP2 payload
        icc = b"\0" * 128
    Image.fromarray(rgb).save(os.path.join(jm, "exif_orient6.jpg"), quality=90, exif=exif_orientation(6))
    add("exif_orientation_6", "jpeg-metadata", "exif_orient6.jpg", note="orientation ignored")
    Image.fromarray(rgb).save(os.path.join(jm, "icc.jpg"), quality=90, icc_profile=icc, subsampling=1)
    add("icc_profile", "jpeg-metadata", "icc.jpg", note="ICC ignored")
    Image.fromarray(rgb).save(os.path.join(jm, "exif8_icc.jpg"), quality=90, icc_profile=icc,
                              exif=exif_orientation(8), subsampling=0)
    add("exif8_icc", "jpeg-metadata", "exif8_icc.jpg")

    # --- PNG: every colour type; stored raw by default (alpha dropped, not composited)
    pd = d("png")
    im = Image.fromarray(rgb)
    im.convert("L").save(os.path.join(pd, "gray.png"))
    add("png_gray", "png", "gray.png")
    la = im.convert("LA")
    la.putalpha(Image.fromarray((np.arange(W)[None, :].repeat(H, 0) * 255 // (W - 1)).astype(np.uint8)))
    la.save(os.path.join(pd, "gray_alpha.png"))
    add("png_gray_alpha", "png", "gray_alpha.png", note="alpha dropped")
    pal = im.quantize(colors=64, method=Image.Quantize.MEDIANCUT)
    pal.save(os.path.join(pd, "palette.png"))
    add("png_palette", "png", "palette.png")
    pal.save(os.path.join(pd, "palette_trns.png"), transparency=bytes([0, 128] + [255] * 62))
    add("png_palette_trns", "png", "palette_trns.png", note="tRNS dropped")
    rgba = im.copy()
    alpha = np.zeros((H, W), np.uint8)
    alpha[:, W // 3:] = 128
    alpha[:, 2 * W // 3:] = 255
    rgba.putalpha(Image.fromarray(alpha))
    rgba.save(os.path.join(pd, "rgba.png"))
    add("png_rgba", "png", "rgba.png", note="alpha 0/128/255 stripes, dropped")
    rng = np.random.default_rng(5)
    rgb16 = rgb.astype(np.uint16) * 257 + rng.integers(0, 257, rgb.shape).astype(np.uint16)
    write_png16(os.path.join(pd, "rgb16.png"), rgb16)
    add("png_rgb16", "png", "rgb16.png", ref_mode="png16", note="16-bit: the high byte")
    write_png16(os.path.join(pd, "gray16.png"), rgb16[:, :, 1])
    add("png_gray16", "png", "gray16.png", ref_mode="png16", note="16-bit gray: the high byte")

    # --- file names: spaces, non-UTF-8 bytes, upper-case extension
    nd = d("names")
    shutil.copy(os.path.join(jd, "baseline_420.jpg"), os.path.join(nd, "a name with spaces.jpg"))
    add("name_spaces", "names", "a name with spaces.jpg")
    bad_name = b"latin1-\xe9t\xe9-\xff\xfe.jpg"
    shutil.copy(os.path.join(jd, "baseline_444.jpg"), os.path.join(os.fsencode(nd), bad_name))
    add("name_non_utf8", "names", bad_name, note="bytes E9 FF FE")
    shutil.copy(os.path.join(pd, "rgba.png"), os.path.join(nd, "UPPER CASE.PNG"))
    add("name_upper_png", "names", "UPPER CASE.PNG")

    # --- bad inputs: refused naming the file, exit 1, no output
    bd = d("bad")
    base = open(os.path.join(jd, "baseline_420.jpg"), "rb").read()
    open(os.path.join(bd, "sof_12bit.jpg"), "wb").write(make_12bit_sof(base))
    add("jpeg_12bit_sof", "bad", "sof_12bit.jpg", expect="error", note="precision 12",
        extra={"message": b"precision 12"})
    open(os.path.join(bd, "truncated.jpg"), "wb").write(base[: len(base) // 2])
    add("jpeg_truncated", "bad", "truncated.jpg", expect="error", note="half the bytes")
    open(os.path.join(bd, "truncated_progressive.jpg"), "wb").write(
        open(os.path.join(jd, "progressive_420.jpg"), "rb").read()[:-600])
    add("jpeg_truncated_progressive", "bad", "truncated_progressive.jpg", expect="error")
    open(os.path.join(bd, "empty.jpg"), "wb").close()
    add("empty_jpg", "bad", "empty.jpg", expect="error")
    open(os.path.join(bd, "empty.png"), "wb").close()
    add("empty_png", "bad", "empty.png", expect="error")
    png = open(os.path.join(pd, "rgba.png"), "rb").read()
    open(os.path.join(bd, "truncated.png"), "wb").write(png[: len(png) // 2])
    add("png_truncated", "bad", "truncated.png", expect="error")
    # Decompression bombs: 20000 x 20000 = 400 M pixels, over the 178,956,970-pixel default limit (PIL's).
    open(os.path.join(bd, "bomb_20000x20000.jpg"), "wb").write(with_sof_size(base, 20000, 20000))
    add("jpeg_pixel_bomb", "bad", "bomb_20000x20000.jpg", expect="error", note="SOF claims 20000x20000",
        extra={"bomb": True})
    png_bomb(os.path.join(bd, "bomb_20000x20000.png"), 20000, 20000)
    add("png_pixel_bomb", "bad", "bomb_20000x20000.png", expect="error", note="IHDR claims 20000x20000",
        extra={"bomb": True})
    open(os.path.join(bd, "text.jpg"), "wb").write(b"this is not an image\n" * 10)
    add("not_an_image", "bad", "text.jpg", expect="error")

    # --- a few real photos
    if photos_tar and os.path.exists(photos_tar):
        ph = d("photos")
        want_gray, want_rgb = 1, max(0, n_photos - 1)
        proc = subprocess.Popen(["zstd", "-dc", photos_tar], stdout=subprocess.PIPE)
        with tarfile.open(fileobj=proc.stdout, mode="r|") as tf:
            for m in tf:
                if not m.isfile() or not (want_gray or want_rgb):
                    continue
                data = tf.extractfile(m).read()
                mode = Image.open(io.BytesIO(data)).mode
                if (mode == "L" and want_gray) or (mode == "RGB" and want_rgb):
                    fname = os.path.basename(m.name)
                    open(os.path.join(ph, fname), "wb").write(data)
                    size = Image.open(io.BytesIO(data)).size
                    add("photo_" + fname.split("_", 1)[1].rsplit(".", 1)[0].lower()[:24], "photos", fname,
                        gray=mode == "L", note=f"{mode} {size[0]}x{size[1]}")
                    if mode == "L":
                        want_gray -= 1
                    else:
                        want_rgb -= 1
        proc.stdout.close()
        proc.wait()
    shutil.rmtree(tmp)
    return cases


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: make_inputs.py OUT [--photos TAR]")
    tar = sys.argv[sys.argv.index("--photos") + 1] if "--photos" in sys.argv else ""
    for c in generate(sys.argv[1], tar):
        print(f"{c.cls:14s} {c.name:28s} {c.expect:6s} {os.fsdecode(c.path)}")
