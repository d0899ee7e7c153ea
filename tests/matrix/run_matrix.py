#!/usr/bin/python3
"""Unusual-input matrix, part 2: every generated input x every build mode through the dsc CLI.

    /usr/bin/python3 tests/matrix/run_matrix.py --dsc build/dsc --work build/matrix \\
        --photos ../shared/data/imagenet-photos-500.tar.zst [--write-doc docs/reliability.md]

For each input (tests/matrix/make_inputs.py) and each mode (pass-through, --max-resolution 64,
--center-crop 0.875, --reencode, --encoding raw), `dsc build` runs on a tree holding only that input:
- bad inputs must be refused: exit 1, the file named on stderr, no output file left behind;
- good inputs must build, and then
  * the stored pixels (`dsc export --ppm`, with `--upsampling fancy` when export has that option) are
    compared with PIL's decode of the source (orientation and ICC ignored, alpha dropped, as PIL's
    convert("RGB") does): exactly where nothing was re-encoded or resampled; by PSNR and mean bias
    where the writer re-encoded (bounds below); against PIL's BOX resize (area averaging, the writer's
    documented filter) after --max-resolution; against a crop of the decode after --center-crop;
  * `dsc verify --decode` passes;
  * the loader reads every sample (`dsc bench --epochs 1`).
Prints a table; exits 1 when any cell fails. Runs on 2 cores in well under 2 minutes.
"""
import argparse
import concurrent.futures as cf
import io
import os
import re
import resource
import shutil
import subprocess
import sys
import time
import warnings
import zlib

import numpy as np
from PIL import Image

# PIL warns that palette + tRNS "should be converted to RGBA": dropping it is the point here.
warnings.filterwarnings("ignore", message="Palette images with Transparency")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_inputs  # noqa: E402

MODES = [
    ("pass", []),
    ("maxres64", ["--max-resolution", "64"]),
    ("crop0.875", ["--center-crop", "0.875"]),
    ("reencode", ["--reencode"]),
    ("raw", ["--encoding", "raw"]),
]
# Stated bounds. The writer re-encodes with TurboJPEG at its default quality 90, 4:2:0 (gray stays gray).
# The independent expectation for a re-encoded cell is PIL's encode + decode of the reference at the
# same settings (jpeg_roundtrip). TurboJPEG compresses with the fast integer DCT by default and PIL with
# the accurate one, so the two differ slightly: >= 40 dB and |mean bias| <= 0.1 per channel (measured on
# correct cells: 43.8..55 dB, |bias| <= 0.07).
# Resampling (--max-resolution, area averaging) is checked twice:
# - against a naive exact area average (numpy, float64, round half up): within 1 per pixel and
#   |mean bias| <= 0.05 when stored raw; >= 40 dB and |bias| <= 0.1 after the JPEG round trip;
# - against PIL's BOX resize, which is not an exact area average (it keeps or drops whole source pixels
#   by their centre, and rounds the many .5 averages up, so it is 0.15..0.4 brighter than the exact
#   average on these inputs): >= 27 dB and |bias| <= 0.6 (correct cells measure 29.0..34.5 dB).
PSNR_JPEG, BIAS_JPEG = 40.0, 0.1
BIAS_AREA_RAW = 0.05
PSNR_BOX, BIAS_BOX = 27.0, 0.6
# CMYK / YCCK: dsc's CMYK -> RGB (R = C x K / 255 on the stored inverted values) and PIL's differ in
# rounding, so those cells are compared by >= 38 dB and |bias| <= 0.3.
PSNR_CMYK, BIAS_CMYK = 38.0, 0.3


def reference_rgb(case):
    """The source's pixels as PIL (and torchvision's PIL path) gives them: no EXIF transpose, no
    colour management, alpha and tRNS dropped by convert("RGB")."""
    if case.ref_mode == "png16":
        return png16_to_rgb8(case.path)
    with Image.open(os.fsdecode(case.path)) as im:
        return np.asarray(im.convert("RGB"))


def png16_to_rgb8(path):
    """Reads the 16-bit PNGs make_inputs writes (filter 0 rows) and keeps the high byte of each sample:
    what PIL's 16-bit RGB decode gives and what dsc documents (PIL's convert clamps 16-bit gray)."""
    data = open(path, "rb").read()
    pos, idat, ihdr = 8, b"", None
    while pos < len(data):
        n = int.from_bytes(data[pos:pos + 4], "big")
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            ihdr = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, ctype = int.from_bytes(ihdr[0:4], "big"), int.from_bytes(ihdr[4:8], "big"), ihdr[9]
    ch = 3 if ctype == 2 else 1
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(h, 1 + w * ch * 2)
    assert (raw[:, 0] == 0).all()
    v = raw[:, 1:].copy().view(">u2").reshape(h, w, ch)
    v8 = (v >> 8).astype(np.uint8)
    return np.repeat(v8, 3, axis=2) if ch == 1 else v8


def area_average(img, ow, oh):
    """Exact area averaging, written out naively: output pixel = mean of the source area it covers
    (fractional pixels weighted by coverage), rounded half up."""
    h, w = img.shape[:2]

    def weights(n, on):
        m = np.zeros((on, n))
        s = n / on
        for o in range(on):
            lo, hi = o * s, (o + 1) * s
            for i in range(int(np.floor(lo)), min(n, int(np.ceil(hi)))):
                m[o, i] = max(0.0, min(hi, i + 1) - max(lo, i))
            m[o] /= m[o].sum()
        return m

    out = np.einsum("oh,hwc->owc", weights(h, oh), img.astype(np.float64))
    out = np.einsum("pw,owc->opc", weights(w, ow), out)
    return np.floor(out + 0.5).clip(0, 255).astype(np.uint8)


def jpeg_roundtrip(rgb, gray):
    """PIL's encode at the writer's defaults (quality 90, 4:2:0; gray as 1-channel), decoded back."""
    im = Image.fromarray(np.ascontiguousarray(rgb[:, :, 0] if gray else rgb))
    buf = io.BytesIO()
    im.save(buf, "JPEG", quality=90, subsampling=2)
    buf.seek(0)
    with Image.open(buf) as back:
        return np.asarray(back.convert("RGB"))


def expected(case, mode, base):
    """The checks for one input x mode: a list of (what, reference pixels, check), check being
    ("exact", max |diff|) or ("near", min PSNR, max |mean bias| per channel)."""
    h, w = base.shape[:2]
    png = case.path.lower().endswith(b".png")
    stored_raw = png or mode == "raw"  # PNGs and --encoding raw store the pixels
    gray = case.gray
    cmyk = not case.exact and not png  # CMYK / YCCK: always re-encoded, colour conversion differs in rounding
    near_cmyk = ("near", PSNR_CMYK, BIAS_CMYK)

    def after_store(ref, what):
        if stored_raw:
            return [(what, ref, near_cmyk if cmyk else ("exact", case.tol))]
        return [(what + ", JPEG q90 round trip", jpeg_roundtrip(ref, gray),
                 near_cmyk if cmyk else ("near", PSNR_JPEG, BIAS_JPEG))]

    if mode == "maxres64" and max(w, h) > 64:
        # FitLongestSide: the longest side becomes 64, the other lround(side x 64 / longest).
        ow, oh = (64, max(1, int(h * 64 / w + 0.5))) if w >= h else (max(1, int(w * 64 / h + 0.5)), 64)
        exact_area = area_average(base, ow, oh)
        box = np.asarray(Image.fromarray(base).resize((ow, oh), Image.BOX))
        if stored_raw:
            checks = [("exact area average", exact_area, near_cmyk if cmyk else ("exact+bias", max(1, case.tol), BIAS_AREA_RAW))]
        else:
            checks = [("exact area average, JPEG q90 round trip", jpeg_roundtrip(exact_area, gray),
                       near_cmyk if cmyk else ("near", PSNR_JPEG, BIAS_JPEG))]
        return checks + [("PIL BOX resize", box, ("near", PSNR_BOX, BIAS_BOX))]
    if mode == "crop0.875":
        side = max(1, int(0.875 * min(w, h) + 0.5))
        x0, y0 = (w - side) // 2, (h - side) // 2  # centred, offsets rounded down
        return after_store(base[y0:y0 + side, x0:x0 + side], "centre crop of the decode")
    if mode == "reencode" and not png:
        return after_store(base, "decode")
    # pass-through, raw, and modes that change nothing: the decode itself (CMYK is re-encoded anyway)
    if cmyk and mode != "raw":
        return [("decode, JPEG q90 round trip", jpeg_roundtrip(base, False), near_cmyk)]
    return [("decode", base, near_cmyk if cmyk else ("exact", case.tol))]


def compare(got, ref, check):
    """(ok, text) for one check."""
    if got.shape != ref.shape:
        return False, f"size {got.shape[1]}x{got.shape[0]} != {ref.shape[1]}x{ref.shape[0]}"
    d = got.astype(np.int32) - ref.astype(np.int32)
    maxd = int(np.abs(d).max()) if d.size else 0
    mse = float((d.astype(np.float64) ** 2).mean())
    psnr = 99.0 if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)
    bias = d.reshape(-1, 3).mean(axis=0)
    b = float(bias[int(np.abs(bias).argmax())])
    if check[0] == "exact":
        ok = maxd <= check[1]
        return ok, ("exact" if maxd == 0 else f"max diff {maxd}") + ("" if ok else f" > {check[1]}, {psnr:.1f} dB, bias {b:+.2f}")
    if check[0] == "exact+bias":
        ok = maxd <= check[1] and abs(b) <= check[2]
        return ok, f"max diff {maxd}, bias {b:+.2f}" + ("" if ok else f" (bound {check[1]}, {check[2]})")
    ok = psnr >= check[1] and abs(b) <= check[2]
    return ok, f"{psnr:.1f} dB, bias {b:+.2f}" + ("" if ok else f" (bound {check[1]:.0f} dB, {check[2]})")


def limit_memory(limit):
    """preexec_fn: caps the child's address space, so an input that makes dsc allocate gigabytes fails
    (bad_alloc, a crash) instead of taking the shared machine's memory."""
    def apply():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return apply


def run(cmd, timeout=60, mem_limit=0):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                           preexec_fn=limit_memory(mem_limit) if mem_limit else None)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return "timeout", b"", b""


def short(b: bytes, n=160):
    s = b.decode("utf-8", "replace").strip().replace("\n", " | ")
    return s[:n]


# Address-space cap for dsc on the decompression-bomb inputs (not for sanitizer builds, which reserve
# terabytes of shadow memory): a correct dsc refuses them before allocating anything large.
BOMB_MEM_LIMIT = 1 << 30


def one_cell(dsc, work, case, mode, flags, export_fancy, sanitized=False):
    """Returns (ok, text) for one input x mode."""
    tree = os.path.join(work.encode(), b"trees", case.name.encode())
    out_dir = os.path.join(work.encode(), b"out", f"{case.name}-{mode}".encode())
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    out = os.path.join(out_dir, b"f.beton")
    cap = BOMB_MEM_LIMIT if case.extra.get("bomb") and not sanitized else 0
    rc, so, se = run([dsc, b"build", tree, out, b"--quiet", b"--threads", b"1", *[f.encode() for f in flags]],
                     mem_limit=cap)
    fname = os.path.basename(case.path)
    if case.expect == "error":
        problems = []
        if rc != 1:
            problems.append(f"exit {rc} (want 1)" + (" (crashed)" if isinstance(rc, int) and rc < 0 else "") +
                            (f", under a {cap >> 20} MiB address-space cap" if cap else "") + f": {short(se, 100)}")
        if rc == 1 and fname not in se:
            problems.append(f"file not named: {short(se)}")
        if rc == 1 and case.extra.get("message", b"") not in se:
            problems.append(f"no '{case.extra['message'].decode()}' in: {short(se)}")
        if os.listdir(out_dir):
            problems.append(f"left {len(os.listdir(out_dir))} file(s) behind")
        return (not problems), ("refused" if not problems else "; ".join(problems))
    if rc != 0:
        return False, f"build exit {rc}: {short(se)}" if rc != -11 else "build crashed (SIGSEGV)"
    base = reference_rgb(case)
    exp = os.path.join(out_dir, b"export")
    cmd = [dsc, b"export", out, b"--index", b"0", b"--count", b"1", b"--out", exp, b"--ppm"]
    if export_fancy:
        cmd += [b"--upsampling", b"fancy"]
    rc, so, se = run(cmd)
    if rc != 0:
        return False, f"export exit {rc}: {short(se)}"
    with Image.open(os.path.join(exp, b"00000000.ppm")) as im:
        got = np.asarray(im.convert("RGB"))
    texts = []
    for what, ref, check in expected(case, mode, base):
        ok, txt = compare(got, ref, check)
        if not ok:
            return False, f"vs {what}: {txt}"
        texts.append(txt)
    txt = "; ".join(texts)
    rc, so, se = run([dsc, b"verify", b"--decode", out])
    if rc != 0:
        return False, f"verify --decode exit {rc}: {short(se)}"
    rc, so, se = run([dsc, b"bench", out, b"--preset", b"imagenet-train", b"--epochs", b"1", b"--batch-size", b"1",
                      b"--threads", b"1", b"--verify"])
    m = re.search(rb"epoch 0: (\d+) images", so)
    if rc != 0 or not m or int(m.group(1)) != 1:
        return False, f"bench exit {rc}: {short(se or so)}"
    return True, txt


def whole_tree(dsc, work, cases):
    """Every good input in one class tree (their own class folders), built once: mixed sizes, colour
    types and encodings in one file; verify --decode passes and the loader reads every sample."""
    good = [c for c in cases if c.expect == "ok"]
    tree = os.path.join(work.encode(), b"trees", b"_all")
    for c in good:
        d = os.path.join(tree, c.cls.encode())
        os.makedirs(d, exist_ok=True)
        shutil.copy(c.path, os.path.join(d, os.path.basename(c.path)))
    out_dir = os.path.join(work.encode(), b"out", b"_all")
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, b"all.beton")
    rc, so, se = run([dsc, b"build", tree, out, b"--quiet", b"--threads", b"2"])
    if rc != 0:
        return False, f"build exit {rc}: {short(se)}"
    rc, so, se = run([dsc, b"verify", b"--decode", out])
    if rc != 0:
        return False, f"verify --decode exit {rc}: {short(se)}"
    rc, so, se = run([dsc, b"bench", out, b"--preset", b"imagenet-train", b"--epochs", b"1", b"--batch-size", b"1",
                      b"--threads", b"2"])
    m = re.search(rb"epoch 0: (\d+) images", so)
    if rc != 0 or not m or int(m.group(1)) != len(good):
        return False, f"bench exit {rc}, read {m.group(1).decode() if m else '?'} of {len(good)}: {short(se or so)}"
    return True, f"{len(good)} samples in {len({c.cls for c in good})} classes: built, verified, all read"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsc", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--photos", default="")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--write-doc", default="", help="replace the matrix table in this markdown file")
    a = ap.parse_args()
    t0 = time.time()
    work = os.path.abspath(a.work)
    cases = make_inputs.generate(work, a.photos)
    shutil.rmtree(os.path.join(work, "trees"), ignore_errors=True)
    shutil.rmtree(os.path.join(work, "out"), ignore_errors=True)
    for c in cases:  # one tree per input: <case>/<class>/<file>
        d = os.path.join(work.encode(), b"trees", c.name.encode(), c.cls.encode())
        os.makedirs(d)
        shutil.copy(c.path, os.path.join(d, os.path.basename(c.path)))
    _, help_out, help_err = run([a.dsc, "export", "--help"])
    export_fancy = b"--upsampling" in help_out + help_err
    dsc = os.fsencode(a.dsc)
    with open(a.dsc, "rb") as f:
        blob = f.read()
    sanitized = b"__asan_init" in blob or b"__tsan_init" in blob

    results = {}
    with cf.ThreadPoolExecutor(max_workers=a.jobs) as ex:
        futs = {ex.submit(one_cell, dsc, work, c, m, f, export_fancy, sanitized): (c.name, m) for c in cases for m, f in MODES}
        for fu in cf.as_completed(futs):
            try:
                results[futs[fu]] = fu.result()
            except Exception as e:  # noqa: BLE001 - a runner bug must show as a failed cell, not a traceback
                results[futs[fu]] = (False, f"runner error: {e!r}")
    all_ok, all_txt = whole_tree(dsc, work, cases)
    fails = [(c, m) for c in cases for m, _ in MODES if not results[(c.name, m)][0]]
    secs = time.time() - t0

    def cell(c, m):
        ok, txt = results[(c.name, m)]
        return ("ok" if ok else "**FAIL**") + (f" ({txt})" if txt and txt not in ("refused",) else "") \
            if c.expect == "ok" else ("refused, file named" if ok else f"**FAIL** ({txt})")

    header = "| class | input | expect | " + " | ".join(m for m, _ in MODES) + " |"
    lines = [header, "|" + "---|" * (3 + len(MODES))]
    for c in cases:
        lines.append(f"| {c.cls} | {c.name}{' (' + c.note + ')' if c.note else ''} | {c.expect} | " +
                     " | ".join(cell(c, m) for m, _ in MODES) + " |")
    summary = (f"{len(cases)} inputs x {len(MODES)} modes = {len(cases) * len(MODES)} cells, "
               f"{len(fails)} failed, {secs:.0f} s; export upsampling option: "
               f"{'--upsampling fancy' if export_fancy else 'none (export default decode)'}; "
               f"every good input in one tree: {'ok' if all_ok else '**FAIL**'} ({all_txt})")
    print("\n".join(lines))
    print(summary)
    for c, m in fails:
        print(f"FAILED {c.name} x {m}: {results[(c.name, m)][1]}")
    if a.write_doc:
        write_doc(a.write_doc, "\n".join(lines), summary)
    return 1 if fails or not all_ok else 0


def write_doc(path, table, summary):
    begin, end = "<!-- matrix-table:begin -->", "<!-- matrix-table:end -->"
    text = open(path, encoding="utf-8").read()
    block = f"{begin}\n{summary}\n\n{table}\n{end}"
    if begin in text and end in text:
        text = text[:text.index(begin)] + block + text[text.index(end) + len(end):]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    open(path, "w", encoding="utf-8").write(text)


if __name__ == "__main__":
    sys.exit(main())
