"""The facade's dtypes (NumPy dtypes under torch's names) and torch's type promotion."""
from __future__ import annotations

import builtins

import numpy as np


class dtype:  # noqa: N801  (torch.dtype)
    """torch.dtype: a NumPy dtype with torch's attributes (is_floating_point, is_complex,
    is_signed, itemsize, to_real(), to_complex()).

    It compares and hashes equal to its NumPy dtype (`ft.float32 == np.float32`,
    `{np.dtype("float32"): v}[ft.float32]`), and NumPy takes it wherever it takes a dtype
    (`np.dtype(ft.float32)`, `np.zeros(3, ft.float32)`) through its `.dtype` attribute, NumPy's
    protocol for objects carrying a dtype. `Tensor.dtype` returns one; the facade's arrays and
    the functional side keep plain NumPy dtypes (`to_dtype` unwraps)."""
    __slots__ = ("dtype", "name", "kind", "char", "itemsize", "type", "is_floating_point",
                 "is_complex", "is_signed")

    def __init__(self, np_dtype):
        d = np.dtype(np_dtype)
        self.dtype, self.name, self.kind, self.char = d, d.name, d.kind, d.char
        self.itemsize, self.type = d.itemsize, d.type
        self.is_floating_point = d.kind == "f"
        self.is_complex = d.kind == "c"
        self.is_signed = d.kind in "ifc"

    def __eq__(self, other):
        return self.dtype == (other.dtype if type(other) is dtype else other)

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash(self.dtype)

    def __repr__(self):
        return f"ft.{self.name}"

    def __str__(self):                 # as NumPy's, so messages that print a dtype read as before
        return self.name

    def __reduce__(self):
        return (of, (self.name,))

    def to_real(self):
        """The real dtype of a complex one (complex64 -> float32); any other is itself."""
        return of({"complex64": np.float32, "complex128": np.float64}.get(self.name, self.dtype))

    def to_complex(self):
        """The complex dtype of a floating one (float32 -> complex64); complex ones are
        themselves."""
        if self.kind == "c":
            return self
        c = {"float32": np.complex64, "float64": np.complex128}.get(self.name)
        if c is None:
            raise RuntimeError(f"to_complex: functrans has no complex dtype for {self.name} "
                               "(torch's complex32 is missing); use float32 or float64")
        return of(c)


_BY_NP: dict = {}


def of(d):
    """The facade dtype of NumPy dtype (or name) d: one object per dtype, so `is` works."""
    r = _BY_NP.get(d)
    if r is None:
        nd = np.dtype(d)
        r = _BY_NP.get(nd)
        if r is None:
            r = _BY_NP[nd] = dtype(nd)
    return r


float16 = half = of(np.float16)
float32 = float = of(np.float32)  # noqa: A001  (torch.float)
float64 = double = of(np.float64)
int8 = of(np.int8)
int16 = short = of(np.int16)
int32 = int = of(np.int32)  # noqa: A001  (torch.int)
int64 = long = of(np.int64)
uint8 = of(np.uint8)
uint16 = of(np.uint16)
uint32 = of(np.uint32)
uint64 = of(np.uint64)
bool = of(np.bool_)  # noqa: A001  (torch.bool)
complex64 = cfloat = of(np.complex64)
complex128 = cdouble = of(np.complex128)


class UnsupportedDtype:
    """A dtype name torch has and functrans does not (bfloat16): it exists, so that programs
    that name it import and compare (`dtype == torch.bfloat16`), and using it to make or
    convert a tensor raises, saying what is missing."""

    def __init__(self, name, why):
        self.name, self.why = name, why
        self.is_floating_point, self.is_complex, self.is_signed = True, False, True
        self.itemsize = 2

    def __repr__(self):
        return f"torch.{self.name}"

    def refuse(self, what="a tensor"):
        raise TypeError(f"functrans has no {self.name} dtype, so it cannot make {what} of it: "
                        f"{self.why}")


bfloat16 = UnsupportedDtype(
    "bfloat16", "NumPy has no bfloat16 (the ml_dtypes package adds one, but functrans's "
    "arrays, primitives and kernels do not take it). Use float32, or float16 for half "
    "precision; a checkpoint's bfloat16 tensors load after .float() in PyTorch")

class memory_format:  # noqa: N801  (torch.memory_format)
    """torch.memory_format: the layout contiguous()/clone() make. channels_last keeps NCHW
    shapes with the channel axis innermost in memory (NumPy strides express it)."""
    __slots__ = ("name", "order")

    def __init__(self, name, order=None):
        self.name, self.order = name, order

    def __repr__(self):
        return f"torch.{self.name}"

    def axes(self, ndim):
        """The axis order from outermost to innermost in memory for an ndim-dim tensor (None:
        row-major, or keep the tensor's own for preserve_format)."""
        if self.order is None:
            return None
        if ndim != len(self.order):
            raise RuntimeError(f"required rank {len(self.order)} tensor to use {self.name} "
                               f"format")
        return self.order


contiguous_format = memory_format("contiguous_format")
preserve_format = memory_format("preserve_format")
channels_last = memory_format("channels_last", (0, 2, 3, 1))
channels_last_3d = memory_format("channels_last_3d", (0, 2, 3, 4, 1))
legacy_contiguous_format = contiguous_format
MEMORY_FORMATS = ["memory_format", "contiguous_format", "preserve_format", "channels_last",
                  "channels_last_3d", "legacy_contiguous_format"]

NAMES = ["float16", "half", "float32", "float", "float64", "double", "int8", "int16", "short",
         "int32", "int", "int64", "long", "uint8", "uint16", "uint32", "uint64", "bool",
         "complex64", "cfloat", "complex128", "cdouble", "bfloat16"]

_DEFAULT = {"float": float32.dtype}     # NumPy dtypes inside; the facade's dtype outside
_CAT = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}


def get_default_dtype():
    return of(_DEFAULT["float"])


def set_default_dtype(d):
    d = to_dtype(d)
    if d.kind != "f":
        raise TypeError("only floating-point types are supported as the default type")
    _DEFAULT["float"] = d


def to_dtype(d):
    """A NumPy dtype from a dtype, a NumPy scalar type or a name; None stays None."""
    if d is None:
        return None
    if isinstance(d, np.dtype):
        return d
    if type(d) is dtype:
        return d.dtype
    if isinstance(d, UnsupportedDtype):
        d.refuse()
    if isinstance(d, type) and isinstance(getattr(d, "dtype", None), (np.dtype, dtype)):
        return np.dtype(d.dtype)            # a legacy type: t.type(torch.LongTensor)
    if d is builtins.float:
        return _DEFAULT["float"]
    if d is builtins.int:
        return int64.dtype
    if d is builtins.bool:
        return bool.dtype
    if isinstance(d, str) and d.startswith(("torch.", "ft.")):
        d = d.split(".", 1)[1]
    if isinstance(d, str) and d in NAMES:
        d = globals()[d]
        if isinstance(d, UnsupportedDtype):
            d.refuse()
        return d.dtype
    return np.dtype(d)


def category(d) -> int:
    return _CAT[d.kind]


def default_for(cat, like=None):
    """torch's default dtype of a category (a Python scalar of that kind)."""
    if cat == 0:
        return bool.dtype
    if cat == 1:
        return int64.dtype
    f = _DEFAULT["float"]
    if cat == 2:
        return f
    if like is not None and like.kind == "f" and like.itemsize == 8 or f.itemsize == 8:
        return complex128.dtype
    return complex64.dtype


def promote_types(a, b):
    """torch.promote_types of NumPy dtypes: the higher category wins; within one, NumPy's
    rule (ft.promote_types, the public name, is public_promote_types)."""
    if a == b:
        return a
    ca, cb = _CAT[a.kind], _CAT[b.kind]
    if ca == cb:
        return np.promote_types(a, b)
    hi, lo = (a, b) if ca > cb else (b, a)
    if hi.kind == "c" and lo.kind == "f" and lo.itemsize == 8:
        return complex128.dtype
    return hi


def public_promote_types(type1, type2):
    """ft.promote_types (torch.promote_types): the facade's dtype of promote_types."""
    return of(promote_types(to_dtype(type1), to_dtype(type2)))


def _scalar_cat(x):
    t = type(x)
    import builtins
    if t is builtins.bool or t is np.bool_:
        return 0
    if t is builtins.int or isinstance(x, np.integer):
        return 1
    if t is builtins.float or isinstance(x, np.floating):
        return 2
    return 3


def type_name(d):
    """torch's legacy type name for error messages, e.g. torch.FloatTensor."""
    return {"float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor",
            "int64": "LongTensor", "int32": "IntTensor", "int16": "ShortTensor",
            "int8": "CharTensor", "uint8": "ByteTensor", "bool": "BoolTensor"}.get(d.name, d.name)


_SCALAR_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half", "int64": "Long",
                 "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
                 "bool": "Bool", "complex64": "ComplexFloat", "complex128": "ComplexDouble",
                 "bfloat16": "BFloat16"}
_CPP_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half",
              "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
              "uint8": "unsigned char", "bool": "bool", "complex64": "c10::complex<float>",
              "complex128": "c10::complex<double>", "bfloat16": "c10::BFloat16"}


def scalar_name(d):
    """torch's ScalarType name of dtype d for error messages: Float, Double, Long, ..."""
    d = np.dtype(d)
    return _SCALAR_NAMES.get(d.name, d.name)


def meta_name(d):
    """torch's TypeMeta name of dtype d (long, int, float, ...), as some messages print it."""
    d = np.dtype(d)
    return {"int64": "long", "int16": "short"}.get(d.name, cpp_name(d))


def cpp_name(d):
    """The C++ type name torch's kernels print for dtype d: float, double, long int, ..."""
    d = np.dtype(d)
    return _CPP_NAMES.get(d.name, d.name)


_int, _float = builtins.int, builtins.float     # (int and float are dtypes here)


class finfo:  # noqa: N801  (torch's name)
    """torch.finfo: a floating dtype's bits, eps, max, min, tiny (= smallest_normal) and
    resolution as Python numbers; the default dtype's when none is given."""

    def __init__(self, type=None):  # noqa: A002  (torch's argument name)
        d = get_default_dtype() if type is None else to_dtype(type)
        if d.kind not in "fc":
            raise TypeError("torch.finfo() requires a floating point input type. Use "
                            "torch.iinfo to handle 'torch.finfo'")
        f = np.finfo(d)
        self.bits, self.dtype = _int(f.bits), (f.dtype.name if d.kind == "f" else d.name)
        self.eps, self.max, self.min = _float(f.eps), _float(f.max), _float(f.min)
        self.tiny = self.smallest_normal = _float(f.smallest_normal)
        self.resolution = 10.0 ** -_int(f.precision)

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.smallest_normal:g}, "
                f"tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:  # noqa: N801
    """torch.iinfo: an integer dtype's bits, min and max as Python ints."""

    def __init__(self, type):  # noqa: A002
        d = to_dtype(type)
        if d.kind not in "iub":
            raise TypeError("torch.iinfo() requires an integer input type. Use torch.finfo to "
                            "handle 'torch.iinfo'")
        f = np.iinfo(np.uint8 if d.kind == "b" else d)
        self.bits, self.min, self.max, self.dtype = _int(f.bits), _int(f.min), _int(f.max), d.name

    def __repr__(self):
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"
