#!/usr/bin/python3
# usage: bench/make_sparse_ffcv.py OUT.beton
# A sparse FFCV file of ImageNet's shape (1,281,167 samples, ~470 KB JPEG allocations, 8 MiB pages:
# ~630 GB apparent, a few MB on disk): what opening costs when the pages are never read.
import numpy as np, sys
n, size, page = 1281167, 470000, 1 << 23
per = page // size
IMAGE = np.dtype([('mode', 'u1'), ('width', '<u2'), ('height', '<u2'), ('data_ptr', '<u8')])
rec = np.dtype([('image', IMAGE), ('label', '<i8')], align=True)
hdr = np.zeros(1, np.dtype([('version', '<u2'), ('num_fields', '<u2'), ('page_size', '<u4'), ('num_samples', '<u8'), ('alloc_table_ptr', '<u8')]))
desc = np.zeros(2, np.dtype([('type_id', 'u1'), ('name', 'u1', 16), ('arguments', 'u1', 1024)]))
desc[0]['type_id'] = 2; desc[0]['name'][:5] = np.frombuffer(b'image', 'u1')
desc[1]['type_id'] = 1; desc[1]['name'][:5] = np.frombuffer(b'label', 'u1')
meta = np.zeros(n, rec)
start = 24 + desc.nbytes
data = -(-(start + meta.nbytes) // page) * page
i = np.arange(n, dtype=np.uint64)
ptr = data + (i // per) * page + (i % per) * size
meta['image']['mode'] = 0; meta['image']['width'] = 500; meta['image']['height'] = 375; meta['image']['data_ptr'] = ptr
meta['label'] = i % 1000
pages = int((n + per - 1) // per)
table_at = data + pages * page
hdr[0] = (2, 2, page, n, table_at)
tab = np.stack([i, ptr, np.full(n, size, np.uint64)], 1).astype('<u8')
rng = np.random.default_rng(0); rng.shuffle(tab)  # unsorted, as several writers leave it
with open(sys.argv[1], 'wb') as f:
    f.write(hdr.tobytes()); f.write(desc.tobytes()); f.write(meta.tobytes())
    f.seek(table_at); f.write(tab.tobytes())
