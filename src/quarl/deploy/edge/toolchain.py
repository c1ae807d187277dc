"""Compiling and running the C policy: the host compiler (a shared library driven through ctypes), and
the tool lookup every microcontroller target uses (`quarl.deploy.edge.targets`: cross compilers, size
tools, emulators). A missing tool is one QuarlError naming the Debian package."""

from __future__ import annotations

import ctypes
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Optional

import numpy as np

from quarl.deploy.edge import cavx2, cfast, targets
from quarl.deploy.edge.cgen import header, source
from quarl.deploy.edge.integer import IntegerPolicy
from quarl.deploy.edge.tools import locate, run
from quarl.errors import QuarlError

logger = logging.getLogger(__name__)

HOST_FLAGS = ["-std=c99", "-O3", "-Wall", "-Wextra", "-Werror"]
PACKAGES = {"cc": "gcc (apt-get install gcc)", **targets.packages()}  # tool -> its Debian packages
HARNESS = r"""/* Host harness: many observations per call, for ctypes (one call per batch, not per state), and a
   native timing of policy_act (ns per call, without the Python call's overhead). */
#define _POSIX_C_SOURCE 199309L
#include <time.h>

#include "policy.h"

void policy_act_many(const float *obs, long n, POLICY_ACTION_T *actions);
double policy_ns_per_call(const float *obs, long n, long repeats);

double policy_ns_per_call(const float *obs, long n, long repeats) {
    struct timespec t0, t1;
    POLICY_ACTION_T action[POLICY_ACTION_DIM];
    volatile POLICY_ACTION_T sink;
    long r, k;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (r = 0; r < repeats; ++r) {
        for (k = 0; k < n; ++k) {
            policy_act(obs + k * POLICY_OBS_DIM, action);
            sink = action[0];
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    (void)sink;
    return ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / (double)(n * repeats);
}

void policy_act_many(const float *obs, long n, POLICY_ACTION_T *actions) {
    long k;
    for (k = 0; k < n; ++k) {
        policy_act(obs + k * POLICY_OBS_DIM, actions + k * POLICY_ACTION_DIM);
    }
}

/* the batch-1 path: the actions as numpy returns them (a discrete action as int64), no conversion in Python */
void policy_act_one(const float *obs, void *out);
void policy_act_one(const float *obs, void *out) {
#if POLICY_DISCRETE
    POLICY_ACTION_T action[POLICY_ACTION_DIM];
    policy_act(obs, action);
    *(int64_t *)out = (int64_t)action[0];
#else
    policy_act(obs, (POLICY_ACTION_T *)out);
#endif
}
"""


def tool(name: str) -> str:
    """The path of `name` (cc: $CC, cc or gcc), or a QuarlError naming the Debian package that has it."""
    candidates = [os.environ.get("CC", ""), "cc", "gcc"] if name == "cc" else [name]
    for candidate in candidates:
        found = shutil.which(candidate) if candidate else None
        if found:
            return found
    return locate(name, PACKAGES[name])  # the error naming the packages


def available(*names: str) -> Optional[str]:
    """None where every tool is installed, else the sentence `tool` raises for the first missing one."""
    for name in names:
        try:
            tool(name)
        except QuarlError as exc:
            return str(exc)
    return None


def write_sources(policy: IntegerPolicy, folder: Path, name: str = "policy") -> tuple[Path, Path]:
    """`name`.h and `name`.c in `folder` (created if needed)."""
    folder.mkdir(parents=True, exist_ok=True)
    h, c = folder / f"{name}.h", folder / f"{name}.c"
    h.write_text(header(policy, name))
    c.write_text(source(policy, name))
    return h, c


class CPolicy:
    """The C policy compiled by the host compiler into a shared library, called through ctypes (the
    batch-1 call as a CPython function where CPython's headers are installed: `cfast`).

    `act(obs)` takes a batch of raw observations and returns actions shaped like
    `IntegerPolicy.act`'s; `act_one(obs)` calls `policy_act` once (the batch-1 path). `vector`: the
    AVX2 kernels (`cavx2`: -mavx2), or the portable C; by default AVX2 where the compiler and CPU have it.
    """

    def __init__(self, policy: IntegerPolicy, folder: Optional[Path] = None, vector: Optional[bool] = None) -> None:
        self.policy = policy
        self._tmp = None if folder is not None else tempfile.TemporaryDirectory(prefix="quarl-c-")
        self.folder = Path(folder if folder is not None else self._tmp.name)  # type: ignore[union-attr]
        cc = tool("cc")
        self.vector = cavx2.host_vector(cc) if vector is None else vector
        _, c = write_sources(policy, self.folder)
        (self.folder / "harness.c").write_text(HARNESS)
        lib = self.folder / "libpolicy.so"
        self.discrete = policy.action_kind == "discrete"
        self.action_dim = 1 if self.discrete else int(np.prod(policy.action_shape))
        # the batch-1 path's buffers, as numpy gives them (ctypes path)
        self._one_in = np.zeros((1, *policy.obs_shape), dtype=np.float32)
        self._one_out = np.zeros(
            (1, *(() if self.discrete else policy.action_shape)), dtype=np.int64 if self.discrete else np.float32
        )
        flags = [*HOST_FLAGS, *(cavx2.FLAGS if self.vector else []), "-fPIC", "-shared", c.name, "harness.c"]
        headers, name = cfast.include(), cfast.module_name()
        if headers is not None:  # with the batch-1 call as a CPython function (cfast)
            try:
                extension = cfast.flags(self.folder, headers, name, self._one_out.shape)
                run([cc, *flags, *extension, "-o", lib.name], self.folder, "Compiling")
            except QuarlError as exc:
                logger.info("the C policy's batch-1 call stays on ctypes: %s", exc)
                headers = None
        if headers is None:
            run([cc, *flags, "-o", lib.name], self.folder, "Compiling the C policy")
        self.lib = ctypes.CDLL(str(lib))
        self._ctype = ctypes.c_int32 if self.discrete else ctypes.c_float
        self._dtype = np.int32 if self.discrete else np.float32
        # raw addresses (c_void_p): the cheapest ctypes call, so a batch-1 call costs little over the C
        self.lib.policy_act.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        self.lib.policy_act.restype = None
        self.lib.policy_act_many.argtypes = [ctypes.c_void_p, ctypes.c_long, ctypes.c_void_p]
        self.lib.policy_act_many.restype = None
        self.lib.policy_ns_per_call.argtypes = [ctypes.c_void_p, ctypes.c_long, ctypes.c_long]
        self.lib.policy_ns_per_call.restype = ctypes.c_double
        self.lib.policy_act_one.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        self.lib.policy_act_one.restype = None
        fast = cfast.load(lib, name) if headers is not None else None
        self.call = "cpython" if fast is not None else "ctypes"  # how act_one reaches the C
        self._fast = fast or self._through_ctypes
        self._one_args = tuple(ctypes.c_void_p(a) for a in (self._one_in.ctypes.data, self._one_out.ctypes.data))

    def _shape(self, out: np.ndarray, n: int) -> np.ndarray:
        if self.discrete:
            return out.reshape(n).astype(np.int64)
        return out.reshape((n, *self.policy.action_shape))

    def act(self, obs: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(self.policy.batch(obs), dtype=np.float32)
        if len(x) == 1:
            return self.act_one(x.reshape(self._one_in.shape))
        out = np.empty((len(x), self.action_dim), dtype=self._dtype)
        self.lib.policy_act_many(x.ctypes.data, len(x), out.ctypes.data)
        return self._shape(out, len(x))

    def act_one(self, obs: np.ndarray) -> np.ndarray:
        """One `policy_act` call (the batch-1 path: `obs` is one observation, or a batch of one)."""
        action = self._fast(obs)  # None where obs is not one float32 observation in C order
        if action is None:
            self._one_in[...] = obs
            action = self._fast(self._one_in)
        assert action is not None
        return action

    def _through_ctypes(self, obs: np.ndarray) -> np.ndarray:
        """The batch-1 call through ctypes (where `cfast` is not built): obs copied into the bound buffer."""
        if obs is not self._one_in:
            self._one_in[...] = obs
        self.lib.policy_act_one(*self._one_args)
        return self._one_out.copy()

    def native_ns(self, obs: np.ndarray, repeats: int = 20) -> float:
        """ns per `policy_act` call over `obs` (one observation per call), timed in C."""
        x = np.ascontiguousarray(self.policy.batch(obs), dtype=np.float32)
        return float(self.lib.policy_ns_per_call(x.ctypes.data, len(x), repeats))

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
