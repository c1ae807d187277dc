"""The host C policy's batch-1 call as a CPython function (`CPolicy.act_one`): ctypes converts its
arguments on every call, which costs more than the policy itself (about 1.1 us against the AVX2
policy's 0.4 us on a loaded 2-core x86), and numpy's conversions of the observation and the action
(`x.ctypes.data`, the result's array) twice that again. A METH_O
function in the same shared library takes a float32 observation as it is and returns the action as a
new numpy array (numpy's C API), in tens of nanoseconds over the policy. Built where CPython's headers
are installed (`Python.h`, on Linux); elsewhere, or where that build fails, the ctypes call stays."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import itertools
import logging
import os
import sys
import sysconfig
from pathlib import Path
from typing import Callable, Optional

import numpy as np

logger = logging.getLogger(__name__)

_names = itertools.count()

SOURCE = r"""/* the batch-1 call as a CPython function (quarl.deploy.edge.cfast): no ctypes conversion per call */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include "policy.h"

void policy_act_one(const float *obs, void *out);

#define OUT_NDIM @NDIM@
static npy_intp out_dims[OUT_NDIM] = {@DIMS@};

/* act(obs): the action of one observation (a float32 array of POLICY_OBS_DIM values in C order) as a new
   array shaped as numpy's (a discrete action as int64); None for any other obs (the caller converts it) */
static PyObject *act(PyObject *self, PyObject *obs) {
    PyArrayObject *x = (PyArrayObject *)obs;
    PyObject *out;
    (void)self;
    if (!PyArray_Check(obs) || PyArray_TYPE(x) != NPY_FLOAT32 || !PyArray_IS_C_CONTIGUOUS(x) ||
        PyArray_SIZE(x) != POLICY_OBS_DIM) {
        Py_RETURN_NONE;
    }
    out = PyArray_SimpleNew(OUT_NDIM, out_dims, POLICY_DISCRETE ? NPY_INT64 : NPY_FLOAT32);
    if (out == NULL) {
        return NULL;
    }
    policy_act_one((const float *)PyArray_DATA(x), PyArray_DATA((PyArrayObject *)out));
    return out;
}

static PyMethodDef methods[] = {{"act", act, METH_O, "the action of one float32 observation, or None"},
                                {NULL, NULL, 0, NULL}};
#define STR2(x) #x
#define STR(x) STR2(x)
#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, STR(QUARL_MODULE), NULL, -1, methods, NULL, NULL, NULL,
                                    NULL};
PyMODINIT_FUNC CAT(PyInit_, QUARL_MODULE)(void) {
    import_array();
    return PyModule_Create(&module);
}
"""


def include() -> Optional[list[str]]:
    """CPython's and numpy's header folders where `Python.h` is installed and the platform is Linux."""
    folder = sysconfig.get_paths().get("include")
    if not sys.platform.startswith("linux") or not folder or not (Path(folder) / "Python.h").exists():
        return None
    return [folder, np.get_include()]


def module_name() -> str:
    """A module name no other C policy of this process has (an extension is imported once per name)."""
    return f"quarl_policy_{os.getpid()}_{next(_names)}"


def flags(folder: Path, headers: list[str], name: str, out_shape: tuple[int, ...]) -> list[str]:
    """Writes the extension's source into `folder` (its actions shaped `out_shape`); the compiler arguments
    that add it to the library."""
    (folder / "fastcall.c").write_text(
        SOURCE.replace("@DIMS@", ", ".join(map(str, out_shape))).replace("@NDIM@", str(len(out_shape)))
    )
    return [*(f"-I{h}" for h in headers), f"-DQUARL_MODULE={name}", "fastcall.c"]


def load(path: Path, name: str) -> Optional[Callable[[np.ndarray], Optional[np.ndarray]]]:
    """The extension `name`'s `act` in the library at `path`, or None where it does not import."""
    try:
        loader = importlib.machinery.ExtensionFileLoader(name, str(path))
        spec = importlib.util.spec_from_file_location(name, str(path), loader=loader)
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
    except (ImportError, OSError, AssertionError) as exc:
        logger.info("the C policy's batch-1 call stays on ctypes: %s", exc)
        return None
    act: Callable[[np.ndarray], Optional[np.ndarray]] = module.act
    return act
