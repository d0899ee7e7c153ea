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
"""
import os as _os


class Views:
    """`views`: N (N views with the same options) or a list of dicts, each overriding the shared
    `options` for its view. `threads` (default: all cores) is split between the views."""

    def __init__(self, path, views=2, *, threads=None, **options):
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
        self._loaders = [Loader(path, **dict(options, **spec, view=k, threads=per)) for k, spec in enumerate(specs)]

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
