#!/usr/bin/python3
"""References for tests/ffcv_test.cc, from NumPy and PIL only (nothing shared with dsc's reader).

  ffcv_ref.py dump NPZ OUTDIR          every array of FFCV's .npz as OUTDIR/<key>.bin (raw bytes)
  ffcv_ref.py write OUT PAGE CHUNK [2] an FFCV file laid out from docs/ffcv-format.md: every field type,
                                       mixed JPEG/raw images, pages filled by two interleaved writers;
                                       expectations beside it as OUT.<what>.bin; with 2, a second
                                       RGBImageField 'thumb' (OUT.thumb_pixels.bin, OUT.thumb_dims.bin)
  ffcv_ref.py tree ROOT OUT            a class-per-folder JPEG tree (CIFAR-10's train/) as an FFCV file:
                                       JPEGs as stored (mode 0), IntField label = sorted class index,
                                       8 MiB pages (bench/: the loader over FFCV's layout)
"""
import io
import json
import os
import sys

import numpy as np
from PIL import Image

IMAGE_META = np.dtype([('mode', 'u1'), ('width', '<u2'), ('height', '<u2'), ('data_ptr', '<u8')])  # packed: 13 bytes
PTR_SIZE = np.dtype([('ptr', '<u8'), ('size', '<u8')])  # packed


def dump(npz, out):
    os.makedirs(out, exist_ok=True)
    with np.load(npz) as z:
        for k in z.files:
            a = z[k]
            if a.dtype.kind == 'U':
                continue
            np.ascontiguousarray(a).tofile(os.path.join(out, k + '.bin'))


def _image(rng, s, jpeg):
    """A w x h image of 8..40 px as FFCV stores it: (payload, mode, w, h, the RGB pixels FFCV decodes)."""
    w, h = int(rng.integers(8, 40)), int(rng.integers(8, 40))
    rgb = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    rgb = np.repeat(np.repeat(rgb[::4, ::4], 4, 0), 4, 1)[:h, :w]  # smoother, so JPEG is small
    rgb = np.ascontiguousarray(rgb)
    if not jpeg:
        return rgb.tobytes(), 1, w, h, rgb
    buf = io.BytesIO()
    if s % 9 == 3:  # a grayscale JPEG: FFCV decodes it to RGB too
        Image.fromarray(rgb).convert('L').save(buf, 'JPEG', quality=90)
    else:
        Image.fromarray(rgb).save(buf, 'JPEG', quality=90, subsampling=2)
    img = buf.getvalue()
    return img, 0, w, h, np.asarray(Image.open(io.BytesIO(img)).convert('RGB'))


def write(out, page, chunk, images=1):
    rng = np.random.default_rng(7)
    n = 37
    names = ['image', 'label', 'score', 'emb', 'mask', 'meta', 'blob', 'label2'] + (['thumb'] if images == 2 else [])
    types = [2, 1, 0, 4, 6, 5, 3, 1] + ([2] if images == 2 else [])
    arrays = {'emb': ('<f4', (5,)), 'mask': ('|u1', (3, 4))}
    meta_types = {0: np.dtype('<f8'), 1: np.dtype('<i8'), 2: IMAGE_META, 3: PTR_SIZE, 4: np.dtype('<u8'),
                  5: PTR_SIZE, 6: np.dtype('<u8')}
    record = np.dtype([(nm, meta_types[t]) for nm, t in zip(names, types)], align=True)
    header = np.zeros(1, np.dtype([('version', '<u2'), ('num_fields', '<u2'), ('page_size', '<u4'),
                                   ('num_samples', '<u8'), ('alloc_table_ptr', '<u8')]))
    desc = np.zeros(len(names), np.dtype([('type_id', 'u1'), ('name', 'u1', 16), ('arguments', 'u1', 1024)]))
    for i, (nm, t) in enumerate(zip(names, types)):
        desc[i]['type_id'] = t
        desc[i]['name'][:len(nm)] = np.frombuffer(nm.encode(), 'u1')
        if nm in arrays:
            dt, shape = arrays[nm]
            args = np.zeros(1024, 'u1')
            args[:8 * len(shape)] = np.array(shape, '<u8').view('u1')
            text = json.dumps([['', dt]]).encode()
            args[256:264] = np.array([len(text)], '<u8').view('u1')
            args[264:264 + len(text)] = np.frombuffer(text, 'u1')
            desc[i]['arguments'] = args
    meta = np.zeros(n, record)
    values = []  # per sample: the variable values in field order
    pixels, thumbs = [], []
    for s in range(n):
        img, mode, w, h, px = _image(rng, s, s % 3 == 0)
        pixels.append(px)
        meta[s]['image'] = (mode, w, h, 0)
        meta[s]['label'] = int(rng.integers(-1000, 1000))
        meta[s]['label2'] = s * 3
        meta[s]['score'] = float(rng.normal())
        emb = rng.normal(size=5).astype('<f4')
        mask = rng.integers(0, 255, (3, 4), dtype=np.uint8)
        text = json.dumps({'s': s, 'k': 'x' * int(rng.integers(0, 20))}).encode() + b'\0'
        blob = bytes(rng.integers(0, 256, int(rng.integers(0, 30)) if s % 5 else 0, dtype=np.uint8))
        values.append([img, emb.tobytes(), mask.tobytes(), text, blob])
        if images == 2:  # its own sizes, JPEG where the first image is raw and the other way round
            t, tmode, tw, th, tpx = _image(rng, s + 1, s % 3 != 0)
            thumbs.append(tpx)
            meta[s]['thumb'] = (tmode, tw, th, 0)
            values[-1].append(t)
    var_fields = ['image', 'emb', 'mask', 'meta', 'blob'] + (['thumb'] if images == 2 else [])

    meta_start = header.nbytes + desc.nbytes
    data_start = -(-(meta_start + meta.nbytes) // page) * page
    pages = {}  # page number -> bytearray
    current = {}  # writer -> [page, used]
    next_page = [0]
    allocs = [[], []]  # per writer: (sample, ptr, size)

    def alloc(wr, s, size):
        cur = current.get(wr)
        if cur is None or cur[1] + size > page:
            cur = current[wr] = [next_page[0], 0]
            next_page[0] += 1
            pages[cur[0]] = bytearray(page)
            fresh = True
        else:
            fresh = False
        ptr = data_start + cur[0] * page + cur[1]
        cur[1] += size
        return ptr, fresh

    for s in range(n):
        wr = (s // chunk) % 2
        for attempt in range(2):
            placed = []
            restarted = False
            for nm, v in zip(var_fields, values[s]):
                ptr, fresh = alloc(wr, s, len(v))
                if fresh and placed:  # the sample does not fit: all of it again on the fresh page
                    current[wr][1] = 0
                    restarted = True
                    break
                placed.append((nm, ptr, v))
            if not restarted:
                break
        for nm, ptr, v in placed:
            pg = (ptr - data_start) // page
            off = (ptr - data_start) % page
            pages[pg][off:off + len(v)] = v
            allocs[wr].append((s, ptr, len(v)))
            if nm in ('image', 'thumb'):
                meta[s][nm]['data_ptr'] = ptr
            elif nm in ('meta', 'blob'):
                meta[s][nm] = (ptr, len(v))
            else:
                meta[s][nm] = ptr
    table = np.array(allocs[1] + allocs[0], '<u8').reshape(-1, 3)  # unsorted, as FFCV's per-worker lists
    header[0] = (2, len(names), page, n, data_start + len(pages) * page)
    with open(out, 'wb') as f:
        f.write(header.tobytes())
        f.write(desc.tobytes())
        f.write(meta.tobytes())
        f.write(b'\0' * (data_start - meta_start - meta.nbytes))
        for k in range(len(pages)):
            f.write(bytes(pages[k]))
        f.write(table.tobytes())
    np.concatenate([p.reshape(-1) for p in pixels]).tofile(out + '.pixels.bin')
    if thumbs:
        np.concatenate([p.reshape(-1) for p in thumbs]).tofile(out + '.thumb_pixels.bin')
        np.array([[p.shape[0], p.shape[1]] for p in thumbs], '<u4').tofile(out + '.thumb_dims.bin')
    np.array([[p.shape[0], p.shape[1]] for p in pixels], '<u4').tofile(out + '.dims.bin')
    meta['label'].astype('<i8').tofile(out + '.label.bin')
    meta['label2'].astype('<i8').tofile(out + '.label2.bin')
    np.array([len(pages)], '<u8').tofile(out + '.pages.bin')
    meta['score'].astype('<f8').tofile(out + '.score.bin')
    for k, nm in enumerate(var_fields[1:], 1):  # each variable field's values back to back, and their ends
        data = [v[k][:-1] if nm == 'meta' else v[k] for v in values]  # JSON: the text, without FFCV's NUL
        np.frombuffer(b''.join(data), 'u1').tofile(out + '.' + nm + '.bin')
        np.cumsum([0] + [len(d) for d in data]).astype('<u8').tofile(out + '.' + nm + '_ends.bin')


def tree(root, out, page=1 << 23):
    classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    files = [(os.path.join(root, c, f), k) for k, c in enumerate(classes) for f in sorted(os.listdir(os.path.join(root, c)))]
    n = len(files)
    record = np.dtype([('image', IMAGE_META), ('label', '<i8')], align=True)
    header = np.zeros(1, np.dtype([('version', '<u2'), ('num_fields', '<u2'), ('page_size', '<u4'),
                                   ('num_samples', '<u8'), ('alloc_table_ptr', '<u8')]))
    desc = np.zeros(2, np.dtype([('type_id', 'u1'), ('name', 'u1', 16), ('arguments', 'u1', 1024)]))
    for i, (nm, t) in enumerate([('image', 2), ('label', 1)]):
        desc[i]['type_id'] = t
        desc[i]['name'][:len(nm)] = np.frombuffer(nm.encode(), 'u1')
    meta = np.zeros(n, record)
    meta_start = header.nbytes + desc.nbytes
    data_start = -(-(meta_start + meta.nbytes) // page) * page
    pages, table, used = [], [], page
    for s, (path, label) in enumerate(files):
        b = open(path, 'rb').read()
        w, h = Image.open(io.BytesIO(b)).size
        if used + len(b) > page:
            pages.append(bytearray(page))
            used = 0
        ptr = data_start + (len(pages) - 1) * page + used
        pages[-1][used:used + len(b)] = b
        used += len(b)
        meta[s] = ((0, w, h, ptr), label)
        table.append((s, ptr, len(b)))
    header[0] = (2, 2, page, n, data_start + len(pages) * page)
    with open(out, 'wb') as f:
        f.write(header.tobytes())
        f.write(desc.tobytes())
        f.write(meta.tobytes())
        f.write(b'\0' * (data_start - meta_start - meta.nbytes))
        for p in pages:
            f.write(bytes(p))
        f.write(np.array(table, '<u8').tobytes())


if __name__ == '__main__':
    if sys.argv[1] == 'dump':
        dump(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == 'tree':
        tree(sys.argv[2], sys.argv[3])
    else:
        write(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]) if len(sys.argv) > 5 else 1)
