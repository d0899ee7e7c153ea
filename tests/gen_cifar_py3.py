"""Writes CIFAR's python-version files with Python 3's pickle and numpy (a test fixture generator).

usage: gen_cifar_py3.py DIR PROTOCOL BATCHES {10|100} {str|bytes}
Reads DIR/train.records and DIR/test.records (CIFAR binary records) and writes the python-version
download next to them, the way a user re-saving CIFAR under Python 3 would.
"""
import os
import pickle
import sys

import numpy as np

out, protocol, batches, kind, keys = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
hundred = kind == "100"
label_bytes = 2 if hundred else 1


def key(k):
    return k.encode() if keys == "bytes" else k


def records(name):
    raw = np.fromfile(os.path.join(out, name), dtype=np.uint8).reshape(-1, label_bytes + 3072)
    return raw[:, label_bytes:].copy(), raw[:, :label_bytes].astype(np.int64)


def batch(data, labels, label):
    d = {key("batch_label"): label, key("data"): data}
    if hundred:
        d[key("fine_labels")] = [int(x) for x in labels[:, 1]]
        d[key("coarse_labels")] = [int(x) for x in labels[:, 0]]
    else:
        d[key("labels")] = [int(x) for x in labels[:, 0]]
    d[key("filenames")] = ["img_%d.png" % i for i in range(len(data))]
    return d


def dump(obj, path):
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=protocol)


root = os.path.join(out, "cifar-100-python" if hundred else "cifar-10-batches-py")
os.makedirs(root, exist_ok=True)
train, train_labels = records("train.records")
test, test_labels = records("test.records")
if hundred:
    dump(batch(train, train_labels, "training batch 1 of 1"), os.path.join(root, "train"))
    dump(batch(test, test_labels, "testing batch 1 of 1"), os.path.join(root, "test"))
    dump({key("fine_label_names"): ["fine_%d" % i for i in range(100)],
          key("coarse_label_names"): ["coarse_%d" % i for i in range(20)]}, os.path.join(root, "meta"))
else:
    per = -(-len(train) // batches)
    for b in range(batches):
        sl = slice(b * per, (b + 1) * per)
        # Labels as a numpy array in one batch, as some re-saved copies have them.
        d = batch(train[sl], train_labels[sl], "training batch %d of 5" % (b + 1))
        if b == 1:
            d[key("labels")] = np.asarray(d[key("labels")], dtype=np.int64)
        dump(d, os.path.join(root, "data_batch_%d" % (b + 1)))
    dump(batch(test, test_labels, "testing batch 1 of 1"), os.path.join(root, "test_batch"))
    names = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    dump({key("label_names"): names, key("num_vis"): 3072}, os.path.join(root, "batches.meta"))
