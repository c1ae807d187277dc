"""quarl policies on the edge: one full-integer int8 policy (TFLite's scheme) as a numpy reference,
and the targets checked against it bit for bit: a C99 policy for microcontrollers (`cgen`,
`toolchain`; its weights packed, or Huffman-coded in one stream: `cstream`, `huffman`) and LiteRT /
TFLite Micro models (`tflite`).

- `integer_policy(net, calibration_obs, statistic, weight_bits)`: the reference (`IntegerPolicy.act`).
- `calibration_states(cfg, policy)`: the states the fp32 policy visits in a record's calibration episodes.
"""

from quarl.deploy.edge.calibrate import calibration_states, visited_states
from quarl.deploy.edge.convert import integer_policy
from quarl.deploy.edge.integer import SUPPORTED, Dense, IntegerPolicy, Quant

__all__ = [
    "SUPPORTED",
    "Dense",
    "IntegerPolicy",
    "Quant",
    "calibration_states",
    "integer_policy",
    "visited_states",
]
