# Independent references for writer_test, computed with PIL (run with /usr/bin/python3, which has PIL
# and numpy).
#
#   pil_ref.py rgb FILE[:W:H] ...   raw RGB bytes of Image.open(FILE).convert("RGB"), box-resized to
#                                   W x H when given, concatenated on stdout
#   pil_ref.py pngs DIR             writes one PNG per colour type / bit depth to DIR/<name>.png and the
#                                   RGB the writer must store to DIR/<name>.rgb
import struct
import sys
import zlib

import numpy as np
from PIL import Image


def rgb(args):
    out = sys.stdout.buffer
    for arg in args:
        parts = arg.split(":")
        im = Image.open(parts[0]).convert("RGB")
        if len(parts) == 3:
            im = im.resize((int(parts[1]), int(parts[2])), Image.BOX)
        out.write(np.asarray(im, dtype=np.uint8).tobytes())


def raw_png(path, arr, color_type):
    """A 16-bit PNG written by hand (PIL cannot write 16-bit RGB): one IDAT, filter 0 on every row."""
    h, w = arr.shape[:2]
    rows = arr.astype(">u2").reshape(h, -1).view(np.uint8)
    data = b"".join(b"\0" + rows[y].tobytes() for y in range(h))

    def chunk(tag, body):
        return struct.pack(">I", len(body)) + tag + body + struct.pack(">I", zlib.crc32(tag + body))

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, color_type, 0, 0, 0)))
        f.write(chunk(b"IDAT", zlib.compress(data)))
        f.write(chunk(b"IEND", b""))


def pngs(out_dir):
    rng = np.random.default_rng(7)
    w, h = 37, 23

    def u8(*shape):
        return rng.integers(0, 256, size=(h, w) + shape, dtype=np.uint8)

    def save(name, im, **kw):
        im.save(f"{out_dir}/{name}.png", **kw)
        with open(f"{out_dir}/{name}.rgb", "wb") as f:
            f.write(np.asarray(Image.open(f"{out_dir}/{name}.png").convert("RGB")).tobytes())

    save("gray", Image.fromarray(u8()))
    save("gray1", Image.fromarray(u8() > 127))  # 1-bit
    save("gray_trns", Image.fromarray(u8()), transparency=17)
    la = u8(2)
    la[::3, :, 1] = 0  # fully transparent pixels must keep their colour, not take a background
    save("gray_alpha", Image.fromarray(la, "LA"))
    pal = Image.fromarray(u8() % 16).convert("P")
    pal.putpalette(list(rng.integers(0, 256, size=16 * 3, dtype=np.uint8).tolist()))
    save("palette", pal)
    save("palette_trns", pal, transparency=bytes([0, 128, 255] * 5 + [3]))
    save("rgb", Image.fromarray(u8(3)))
    rgba = u8(4)
    rgba[::2, :, 3] = 0
    save("rgba", Image.fromarray(rgba, "RGBA"))
    # 16-bit: PIL keeps the high byte of RGB samples. For 16-bit gray PIL's convert("RGB") clamps the
    # value to 255 instead (mode I;16), which is not a useful image; dsc takes the high byte there too.
    for name, ct, arr in (("rgb16", 2, rng.integers(0, 65536, size=(h, w, 3))),
                          ("rgba16", 6, rng.integers(0, 65536, size=(h, w, 4))),
                          ("gray16", 0, rng.integers(0, 65536, size=(h, w)))):
        raw_png(f"{out_dir}/{name}.png", arr, ct)
        hi = (arr >> 8).astype(np.uint8)
        want = np.repeat(hi[:, :, None], 3, axis=2) if ct == 0 else hi[:, :, :3]
        with open(f"{out_dir}/{name}.rgb", "wb") as f:
            f.write(np.ascontiguousarray(want).tobytes())
    # The RGB cases must agree with PIL's own reading of the hand-made files.
    for name in ("rgb16", "rgba16"):
        got = np.asarray(Image.open(f"{out_dir}/{name}.png").convert("RGB")).tobytes()
        assert got == open(f"{out_dir}/{name}.rgb", "rb").read(), name


if __name__ == "__main__":
    if sys.argv[1] == "rgb":
        rgb(sys.argv[2:])
    elif sys.argv[1] == "pngs":
        pngs(sys.argv[2])
    else:
        sys.exit("usage: pil_ref.py rgb FILE[:W:H]... | pngs DIR")
