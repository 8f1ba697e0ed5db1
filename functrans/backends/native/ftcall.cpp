// functrans native backend: the call from Python into a generated kernel, without ctypes.
// call(address, n, threads, *arrays) runs `void kernel(void* const* p, long long n, int nt)`
// on the arrays' data pointers; it returns False (running nothing) when an argument is not
// a C-contiguous numpy.ndarray, so that the caller can make it one and call again.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>

// the leading fields of NumPy's PyArrayObject (stable across NumPy 1.x and 2.x)
struct ft_array {
  PyObject_HEAD
  char* data;
  int nd;
  Py_ssize_t* dimensions;
  Py_ssize_t* strides;
  PyObject* base;
  PyObject* descr;
  int flags;
};
static const int FT_C_CONTIGUOUS = 0x0001;     // NPY_ARRAY_C_CONTIGUOUS
static const Py_ssize_t FT_MAX_ARGS = 512;
static const long long FT_RELEASE_GIL = 1 << 14;  // smaller calls keep the GIL

typedef void (*ft_kernel)(void* const*, long long, int);
static PyObject* ft_ndarray = nullptr;
static int ft_forked = 0;        // set in a forked child (pthread_atfork), read at each call:
                                // a getpid() a call was a system call each (~0.2 us)
static void ft_child(void) { ft_forked = 1; }

static PyObject* set_ndarray(PyObject*, PyObject* type) {
  Py_XDECREF(ft_ndarray);
  Py_INCREF(type);
  ft_ndarray = type;
  Py_RETURN_NONE;
}

static PyObject* call(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs < 3 || nargs - 3 > FT_MAX_ARGS || ft_ndarray == nullptr) {
    PyErr_SetString(PyExc_TypeError, "ftcall.call(address, n, threads, *arrays): bad call");
    return nullptr;
  }
  void* p[FT_MAX_ARGS];
  for (Py_ssize_t k = 3; k < nargs; ++k) {
    PyObject* a = args[k];
    if ((PyObject*)Py_TYPE(a) != ft_ndarray || !(((ft_array*)a)->flags & FT_C_CONTIGUOUS))
      Py_RETURN_FALSE;
    p[k - 3] = ((ft_array*)a)->data;
  }
  ft_kernel fn = (ft_kernel)PyLong_AsVoidPtr(args[0]);
  long long n = PyLong_AsLongLong(args[1]);
  int nt = (int)PyLong_AsLong(args[2]);
  if (PyErr_Occurred()) return nullptr;
  if (ft_forked) nt = 1;    // a forked child: GNU OpenMP's threads did not survive
  if (n >= FT_RELEASE_GIL) {
    Py_BEGIN_ALLOW_THREADS
    fn(p, n, nt);
    Py_END_ALLOW_THREADS
  } else {
    fn(p, n, nt);
  }
  Py_RETURN_TRUE;
}

static PyMethodDef ft_methods[] = {
  {"call", (PyCFunction)(void (*)(void))call, METH_FASTCALL, "run a native kernel"},
  {"set_ndarray", set_ndarray, METH_O, "the array type call accepts"},
  {nullptr, nullptr, 0, nullptr}};
static PyModuleDef ft_module = {PyModuleDef_HEAD_INIT, "ftcall", nullptr, -1, ft_methods};

PyMODINIT_FUNC PyInit_ftcall(void) {
  pthread_atfork(nullptr, nullptr, ft_child);
  return PyModule_Create(&ft_module);
}
