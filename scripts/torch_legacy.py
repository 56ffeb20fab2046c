"""Reads a PyTorch state dict saved with the legacy (non-zip, torch < 1.6) serialization,
or the zip format, into numpy arrays — without torch.

Legacy layout: five pickles/blobs back to back: magic number, protocol version, sys info,
the pickled object (tensors refer to storages through persistent ids
`('storage', StorageType, key, location, numel[, view_metadata])`), the list of storage keys,
then for each key in that order: an int64 element count followed by the raw little-endian data.
"""
import io
import pickle
import struct
import zipfile
from collections import OrderedDict

import numpy as np

MAGIC = 0x1950A86A20F9469CFC6C
_DTYPES = {
    "FloatStorage": "<f4",
    "DoubleStorage": "<f8",
    "HalfStorage": "<f2",
    "LongStorage": "<i8",
    "IntStorage": "<i4",
    "ShortStorage": "<i2",
    "CharStorage": "i1",
    "ByteStorage": "u1",
    "BoolStorage": "?",
}


class _StorageType:
    def __init__(self, name):
        self.name = name
        self.dtype = np.dtype(_DTYPES[name])


class _Storage:
    """A storage placeholder; `array` is filled in once the raw data has been read."""

    def __init__(self, dtype):
        self.dtype = dtype
        self.array = None


class _Tensor:
    def __init__(self, storage, offset, size, stride):
        self.storage, self.offset, self.size, self.stride = storage, offset, tuple(size), tuple(stride)

    def numpy(self):
        a = self.storage.array
        item = a.itemsize
        return np.lib.stride_tricks.as_strided(
            a[self.offset:], shape=self.size, strides=[s * item for s in self.stride]
        ).copy()


def _rebuild_tensor_v2(storage, offset, size, stride, *_):
    return _Tensor(storage, offset, size, stride)


class _Unpickler(pickle.Unpickler):
    def __init__(self, f, storages, load_zip=None):
        super().__init__(f)
        self.storages = storages
        self.load_zip = load_zip

    def find_class(self, module, name):
        if module == "torch._utils" and name in ("_rebuild_tensor_v2", "_rebuild_tensor"):
            return _rebuild_tensor_v2
        if module == "torch" and name in _DTYPES:
            return _StorageType(name)
        if module == "collections" and name == "OrderedDict":
            return OrderedDict
        raise pickle.UnpicklingError(f"unsupported global {module}.{name}")

    def persistent_load(self, pid):
        kind, stype, key = pid[0], pid[1], str(pid[2])
        if kind != "storage":
            raise pickle.UnpicklingError(f"unsupported persistent id {pid!r}")
        if key not in self.storages:
            st = _Storage(stype.dtype)
            if self.load_zip is not None:
                st.array = self.load_zip(key, stype.dtype)
            self.storages[key] = st
        return self.storages[key]


def _to_numpy(obj):
    if isinstance(obj, _Tensor):
        return obj.numpy()
    if isinstance(obj, dict):
        return OrderedDict((k, _to_numpy(v)) for k, v in obj.items())
    return obj


def load(path):
    """The state dict in `path` as an OrderedDict of numpy arrays."""
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
            prefix = names[0].split("/")[0]
            load_zip = lambda key, dt: np.frombuffer(z.read(f"{prefix}/data/{key}"), dtype=dt)
            storages = {}
            obj = _Unpickler(io.BytesIO(z.read(f"{prefix}/data.pkl")), storages, load_zip).load()
            return _to_numpy(obj)
    with open(path, "rb") as f:
        if pickle.load(f) != MAGIC:
            raise ValueError(f"{path}: not a torch file (bad magic number)")
        pickle.load(f)  # protocol version
        pickle.load(f)  # sys info (endianness, type sizes)
        storages = {}
        obj = _Unpickler(f, storages).load()
        keys = pickle.load(f)
        for key in keys:
            st = storages[str(key)]
            (numel,) = struct.unpack("<q", f.read(8))
            raw = f.read(numel * st.dtype.itemsize)
            st.array = np.frombuffer(raw, dtype=st.dtype)
        return _to_numpy(obj)
