"""dsc.Views: several independently augmented views of every sample (DINO's two global crops and
several local ones, SimCLR's pairs), one dsc.Loader per view in lockstep.

    views = dsc.Views("imagenet.beton", batch_size=64, flip=True, views=[
        dict(crop="random_resized", out_size=224, scale=(0.4, 1.0)),   # global
        dict(crop="random_resized", out_size=224, scale=(0.4, 1.0)),   # global
        dict(crop="random_resized", out_size=96, scale=(0.05, 0.4)),   # local
    ])
    for images, labels in views:   # images: a list of 3 tensors [64, 3, 224, 224], [..224..], [64, 3, 96, 96]
        ...

Every view reads the same samples in the same order (LoaderOptions::view changes the augmentation
draw only), so view k of batch i is always the same image under its own crop and transforms, for any
thread count. Each view decodes its own copy of the sample (N decodes per sample). A file with typed
fields yields a list of N dicts instead, one per view (masks and boxes follow their own view's crop).

A file with several image fields (format 1.3: a photo and its depth map, two camera angles): a view
takes `image=NAME` to decode that field. With `aligned=True` every view draws view 0's crops and
flips, so images of the same size come out cropped and flipped alike:

    for b in dsc.Views("rgbd.beton", batch_size=32, crop="random_resized", out_size=224, flip=True,
                       aligned=True, views=[dict(image="image"), dict(image="depth")]):
        b["image"], b["depth"], b["label"]   # one dict: each view's image under its field's name

Views of distinct image fields of a typed file yield that one dict (the other fields once, from view
0); other views of a typed file yield a list of dicts.
"""
import os as _os


class Views:
    """`views`: N (N views with the same options) or a list of dicts, each overriding the shared
    `options` for its view. `threads` (default: all cores) is split between the views. `aligned`:
    every view draws the same crops and flips (view 0's), for views of different image fields."""

    def __init__(self, path, views=2, *, threads=None, aligned=False, **options):
        from . import Loader  # the package's Loader (this module is imported by it)
        if isinstance(views, int):
            if views < 1:
                raise ValueError(f"views must be at least 1, got {views}")
            specs = [{} for _ in range(views)]
        else:
            specs = [dict(v) for v in views]
            if not specs or not all(isinstance(v, dict) for v in views):
                raise TypeError("views must be a count or a non-empty list of option dicts")
        for k, spec in enumerate(specs):
            for name in ("view", "order", "seed", "batch_size", "rank", "world_size", "subset", "drop_last"):
                if name in spec:
                    raise ValueError(f"views[{k}]: {name!r} must be the same for every view (give it once, outside views)")
        cores = len(_os.sched_getaffinity(0)) if hasattr(_os, "sched_getaffinity") else (_os.cpu_count() or 1)
        per = max(1, (threads or cores) // len(specs))
        self._loaders = [Loader(path, **dict(options, **spec, view=0 if aligned else k, threads=per))
                         for k, spec in enumerate(specs)]
        # Views of distinct image fields merge into one dict per batch (typed files).
        images = [spec.get("image", options.get("image")) for spec in specs]
        self._merge = len(specs) > 1 and None not in images and len(set(images)) == len(images)

    @property
    def loaders(self):
        """The per-view dsc.Loader objects (view k is loaders[k])."""
        return list(self._loaders)

    def __len__(self):
        return len(self._loaders[0])

    def set_epoch(self, epoch):
        for l in self._loaders:
            l.set_epoch(epoch)

    def epoch(self, epoch):
        return self._zip([l.epoch(epoch, with_indices=True) for l in self._loaders])

    def __iter__(self):
        # Every view's next epoch (they advance together); indices are compared batch by batch.
        starts = [l._next_epoch for l in self._loaders]
        if len(set(starts)) != 1:
            raise RuntimeError(f"the views are at different epochs {starts}: iterate the Views, not its loaders")
        return self.epoch(starts[0])

    def _zip(self, its):
        from ._compat import Batch
        while True:
            parts = [next(it, None) for it in its]
            if parts[0] is None:
                if any(p is not None for p in parts):
                    raise RuntimeError("a view ended before the others")
                return
            if isinstance(parts[0], dict):
                for p in parts[1:]:
                    if not (p["indices"] == parts[0]["indices"]).all():
                        raise RuntimeError("views out of step (different samples)")
                for p in parts:
                    p.pop("indices"), p.pop("padding")
                if self._merge:  # each view's image under its field's name, the rest from view 0
                    merged = dict(parts[0])
                    for p in parts[1:]:
                        merged.update((k, v) for k, v in p.items() if k not in merged)
                    yield merged
                    continue
                yield parts
                continue
            images = [p[0] for p in parts]
            _, labels, indices, padding = parts[0]
            for p in parts[1:]:
                if not (p[2] == indices).all():
                    raise RuntimeError("views out of step (different samples)")
            yield Batch((images, labels), padding, indices)

    def state_dict(self):
        """The shared position (every view's order is the same): restore with load_state_dict."""
        return self._loaders[0].state_dict()

    def load_state_dict(self, state):
        for l in self._loaders:
            l.load_state_dict(state)

    def close(self):
        for l in self._loaders:
            l.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
