# Type stubs for the dsc package (see __init__.py for the documentation).
import os
from . import trace as trace
from .trace import Tracer as Tracer
from . import transforms as T
from typing import Any, Dict, Iterator, List, Literal, Optional, Sequence, Tuple, Union

PathLike = Union[str, os.PathLike]

class Error(RuntimeError): ...
class OptionError(Error, ValueError): ...

PRESETS: Tuple[str, ...]
LOADER_OPTIONS: Tuple[str, ...]
__version__: str

def build(
    source: PathLike,
    out: PathLike,
    *,
    progress: Optional[bool] = ...,
    format: Literal["auto", "cifar-binary", "cifar-python", "tree", "manifest", "webdataset", "ffcv", "jsonl", "csv", "tsv", "coco"] = ...,
    split: Literal["train", "test"] = ...,
    encoding: Literal["default", "jpeg", "raw", "raw-zstd", "auto"] = ...,
    quality: int = ...,
    subsampling: Literal["444", "422", "420", "gray"] = ...,
    max_resolution: int = ...,
    center_crop: float = ...,
    reencode: bool = ...,
    restart_interval: Union[Literal["auto", "none"], int] = ...,
    jpeg_tables: Literal["shared", "inline"] = ...,
    block_size: int = ...,
    threads: Union[int, str] = ...,
    max_pixels: int = ...,
    max_file_size: int = ...,
    skip_invalid: bool = ...,
    shard: Tuple[int, int] = ...,
) -> Dict[str, Any]: ...
def merge(parts: List[PathLike], out: PathLike, *, progress: Optional[bool] = ...) -> Dict[str, Any]: ...
def convert(
    ffcv_file: PathLike,
    out: PathLike,
    *,
    progress: Optional[bool] = ...,
    threads: int = ...,
    restart_interval: Union[Literal["auto", "none"], int] = ...,
    block_size: int = ...,
) -> Dict[str, Any]: ...
def info(path: PathLike) -> Dict[str, Any]: ...

class Batch(Tuple[Any, Any]):
    padding: Any
    indices: Any
IndexedBatch = Tuple[Any, Any, Any, Any]

class Views:
    def __init__(self, path: PathLike, views: Union[int, Sequence[Dict[str, Any]]] = ..., *, threads: Optional[int] = ...,
                 aligned: bool = ..., **options: Any) -> None: ...
    @property
    def loaders(self) -> List["Loader"]: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[Any]: ...
    def epoch(self, epoch: int) -> Iterator[Any]: ...
    def set_epoch(self, epoch: int) -> None: ...
    def state_dict(self) -> Dict[str, Any]: ...
    def load_state_dict(self, state: Dict[str, Any]) -> None: ...
    def close(self) -> None: ...
    def __enter__(self) -> "Views": ...
    def __exit__(self, *exc: Any) -> None: ...

class Loader:
    copy: bool
    pin_memory: bool
    def __init__(
        self,
        path: PathLike,
        preset: Optional[Literal["cifar-train", "cifar-test", "imagenet-train", "imagenet-test"]] = ...,
        *,
        rank: Union[int, Literal["env"], None] = ...,
        world_size: Optional[int] = ...,
        copy: bool = ...,
        pin_memory: bool = ...,
        tracer: Optional[Tracer] = ...,
        pad_last: Optional[bool] = ...,
        batch_transform: Optional[Any] = ...,
        transforms: Union[str, Sequence[Any], None] = ...,
        ragged: Literal["list", "offsets", "padded"] = ...,
        batch_size: int = ...,
        global_batch_size: int = ...,
        threads: int = ...,
        prefetch: int = ...,
        max_leases: int = ...,
        order: Literal["random", "quasi_random", "sequential"] = ...,
        seed: int = ...,
        view: int = ...,
        drop_last: bool = ...,
        quasi_window: int = ...,
        subset: Optional[Sequence[int]] = ...,
        dtype: Union[Literal["float32", "float16", "uint8"], Any] = ...,
        layout: Literal["NCHW", "NHWC"] = ...,
        fancy_upsampling: bool = ...,
        idct: Literal["accurate", "fast"] = ...,
        verify: bool = ...,
        pread: bool = ...,
        dct_scaling: bool = ...,
        jpeg_index_budget: int = ...,
        cache_budget: int = ...,
        cache_dir: str = ...,
        readahead_bytes: int = ...,
        collect_stats: bool = ...,
        max_pixels: int = ...,
        defer_augment: bool = ...,
        autotune: bool = ...,
        image: str = ...,
        channels: Literal[0, 1, 3] = ...,
        fields: Union[str, Sequence[str]] = ...,
        boxes: Union[str, Sequence[str]] = ...,
        points: Union[str, Sequence[str]] = ...,
        views: Union[int, Sequence[Dict[str, Any]], None] = ...,
        remote: Union[str, Sequence[str]] = ...,
        token: str = ...,
        token_file: str = ...,
        tls_root: str = ...,
        local_threads: int = ...,
        wire_compression: bool = ...,
        ship_uint8: bool = ...,
        wire_planes: bool = ...,
        data_path: bool = ...,
        remote_chunk: int = ...,
        remote_in_flight: int = ...,
        crop: Literal["none", "random_resized", "center"] = ...,
        out_size: Union[int, Tuple[int, int]] = ...,
        out_w: int = ...,
        out_h: int = ...,
        scale: Tuple[float, float] = ...,
        ratio: Tuple[float, float] = ...,
        center_ratio: float = ...,
        resize: int = ...,
        flip: bool = ...,
        translate: int = ...,
        cutout: int = ...,
        fill: Tuple[int, int, int] = ...,
        normalize: Union[bool, Dict[str, Any]] = ...,
        mean: Tuple[float, float, float] = ...,
        std: Tuple[float, float, float] = ...,
        lease_memory: int = ...,
        label_dtype: Union[Literal["int64", "int32"], Any] = ...,
    ) -> None: ...
    def __len__(self) -> int: ...
    @property
    def rank(self) -> int: ...
    @property
    def world_size(self) -> int: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def image_size(self) -> Tuple[int, int]: ...
    @property
    def threads(self) -> int: ...
    def epoch(
        self, epoch: int, *, first_batch: int = ..., with_indices: bool = ..., copy: Optional[bool] = ...
    ) -> Iterator[Union[Batch, IndexedBatch]]: ...
    def __iter__(self) -> Iterator[Batch]: ...
    def state_dict(self) -> Dict[str, Any]: ...
    def load_state_dict(self, state: Dict[str, Any]) -> None: ...
    def stats(self, reset: bool = ...) -> Dict[str, Any]: ...
    def buffers_allocated(self) -> int: ...
    def leased(self) -> int: ...
    def close(self) -> None: ...
    def set_epoch(self, epoch: int) -> None: ...
    @property
    def classes(self) -> List[str]: ...
    def dataset(self) -> Any: ...
    def __getitem__(self, i: Any) -> Any: ...
    def __enter__(self) -> "Loader": ...
    def __exit__(self, *exc: Any) -> None: ...

class Writer:
    def __init__(self, path: PathLike, schema: Any, *, threads: int = ..., block_size: int = ..., jpeg_tables: str = ...,
                 encoding: str = ..., quality: int = ..., subsampling: str = ..., max_resolution: int = ...,
                 restart_interval: str = ..., max_file_size: int = ...) -> None: ...
    # An image or bytes field's value may be an os.PathLike (pathlib.Path): the writer reads the file.
    def add(self, sample: Dict[str, Any]) -> None: ...
    def close(self) -> int: ...
    def __len__(self) -> int: ...
    def __enter__(self) -> "Writer": ...
    def __exit__(self, *exc: Any) -> None: ...
def merge_state_dicts(states: List[Dict[str, Any]]) -> Dict[str, Any]: ...
def checksum(array: Any) -> int: ...
def random_subset(total: int, n: int, seed: int) -> List[int]: ...
