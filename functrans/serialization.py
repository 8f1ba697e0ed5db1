"""ft.save / ft.load: state dicts as .npz files that loading can never execute.

torch.save pickles, so loading a file runs whatever code it names. Here a nested
object (dicts, lists, tuples, tensors, arrays, numbers, strings, None) is
flattened: every array becomes one .npz entry and the nesting is a JSON
description stored as a unicode array. np.load runs with allow_pickle=False, so
an object array in a file is refused instead of unpickled.
"""
from __future__ import annotations

import json
import os
from typing import IO, Any

import numpy as np
from .facade import creation as C
from .facade.tensor import Tensor
from .nn.modules.module import Parameter

_SPEC_KEY = "__functrans_spec__"
_FORMAT = "functrans.save/1"


def _encode(obj, arrays, where):
    """The JSON description of `obj`; its arrays are appended to `arrays`."""
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):
        return {"int": int(obj)}
    if isinstance(obj, float):
        return {"float": repr(float(obj))}          # repr keeps nan/inf and every digit
    if isinstance(obj, Tensor):
        arr = np.asarray(obj.detach().cpu().numpy())
        _check_array(arr, where)
        arrays.append(arr)
        return {"tensor": len(arrays) - 1, "requires_grad": bool(obj.requires_grad),
                "parameter": type(obj).__name__ == "Parameter"}
    if isinstance(obj, (np.ndarray, np.generic)):
        arr = np.asarray(obj)
        _check_array(arr, where)
        arrays.append(arr)
        return {"ndarray": len(arrays) - 1}
    if isinstance(obj, dict):
        items = []
        for k, v in obj.items():
            if isinstance(k, bool) or not isinstance(k, (str, int)):
                raise TypeError(f"ft.save: dictionary key {k!r} at {where} is a "
                                f"{type(k).__name__}; only str and int keys can be saved")
            items.append([k if isinstance(k, str) else {"int": k},
                          _encode(v, arrays, f"{where}[{k!r}]")])
        return {"dict": items}
    if isinstance(obj, (list, tuple)):
        kind = "list" if isinstance(obj, list) else "tuple"
        return {kind: [_encode(v, arrays, f"{where}[{i}]") for i, v in enumerate(obj)]}
    raise TypeError(f"ft.save: cannot save {type(obj).__name__} at {where}; only tensors, "
                    "arrays, numbers, strings, None and dicts/lists/tuples of them are "
                    "saved (nothing is pickled)")


def _check_array(arr, where):
    if arr.dtype.hasobject:
        raise TypeError(f"ft.save: the array at {where} has dtype object; object arrays "
                        "would need pickle and are refused")


def save(obj: Any, f: str | os.PathLike | IO[bytes]) -> None:
    """Write `obj` (a state dict or any nesting of tensors, numbers, strings) to `f` as .npz.

    `f` is a path (written exactly as given, without adding ".npz") or a binary file object.
    """
    arrays: list = []
    spec = {"format": _FORMAT, "root": _encode(obj, arrays, "obj")}
    entries = {f"a{i}": a for i, a in enumerate(arrays)}
    entries[_SPEC_KEY] = np.array(json.dumps(spec))
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as fh:
            np.savez(fh, **entries)
    else:
        np.savez(f, **entries)


def _decode(node, arrays, map_location):
    if node is None or isinstance(node, (bool, str)):
        return node
    if not isinstance(node, (dict, list)):
        raise ValueError(f"ft.load: malformed file (unexpected {node!r})")
    if isinstance(node, list):
        raise ValueError("ft.load: malformed file (bare list in the description)")
    if "int" in node:
        return int(node["int"])
    if "float" in node:
        return float(node["float"])
    if "tensor" in node:
        arr = arrays[f"a{int(node['tensor'])}"]
        t = C.from_numpy(np.array(arr))
        if map_location is not None:
            t = t.to(map_location)
        if node.get("parameter"):
            return Parameter(t, requires_grad=bool(node.get("requires_grad", True)))
        if node.get("requires_grad"):
            t.requires_grad_(True)
        return t
    if "ndarray" in node:
        return np.array(arrays[f"a{int(node['ndarray'])}"])
    if "dict" in node:
        out = {}
        for k, v in node["dict"]:
            key = int(k["int"]) if isinstance(k, dict) else k
            out[key] = _decode(v, arrays, map_location)
        return out
    if "list" in node:
        return [_decode(v, arrays, map_location) for v in node["list"]]
    if "tuple" in node:
        return tuple(_decode(v, arrays, map_location) for v in node["tuple"])
    raise ValueError(f"ft.load: malformed file (unknown entry {sorted(node)})")


def load(f: str | os.PathLike | IO[bytes], map_location: Any = None,
         weights_only: bool = True) -> Any:
    """Read what ft.save wrote. A plain .npz (np.savez) loads as a dict of tensors.

    Never unpickles: object arrays in the file raise instead of running code.
    `weights_only` is accepted for torch compatibility; loading is always weights-only.
    """
    with np.load(f, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    if _SPEC_KEY not in arrays:
        return {k: C.from_numpy(np.array(v)) for k, v in arrays.items()}
    spec = json.loads(str(arrays.pop(_SPEC_KEY)))
    if spec.get("format") != _FORMAT:
        raise ValueError(f"ft.load: unknown file format {spec.get('format')!r}")
    return _decode(spec["root"], arrays, map_location)
