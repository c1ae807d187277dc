"""`quarl.store.flags`: which records compare against a weak fp32 baseline."""

import pandas as pd

from quarl.store.flags import flags, with_flags


def test_a_record_from_before_random_returns_is_judged_with_the_envs_shipped_one():
    """DDPG MountainCarContinuous at -99.9, worse than a random policy (-33.3 as quarl ships the env):
    its note, written before env.random_return existed, could only say 'not solved'."""
    old = {"env": "mountaincar_continuous", "env.id": "MountainCarContinuous-v0", "status": "done",
           "fp32_reward": -99.9, "fp32_note": "the fp32 policy's reward -99.9 is below the threshold 90"}
    solved = {**old, "fp32_reward": 93.9, "fp32_note": None}
    short = {**old, "fp32_reward": 85.0, "fp32_note": "the fp32 policy's reward 85 is below the threshold 90"}
    unknown = {"env": "my_env", "status": "done", "fp32_reward": 1.0, "fp32_note": None}
    runs = pd.DataFrame([old, solved, short, unknown])
    assert list(flags(runs)) == ["not learned", None, "not solved", None]
    assert list(with_flags(runs)["fp32_flag"]) == ["† not learned", "", "‡ not solved", ""]


def test_flags_of_a_string_column_holding_nan_are_none():
    """pandas 3 keeps a string column's None as NaN, which is truthy: no KeyError, no mark."""
    runs = pd.DataFrame({"env": ["cartpole", "cartpole"], "status": ["done", "done"], "fp32_reward": [500.0, 14.0],
                         "env.random_return": [23.7, 23.7], "env.return_scale": [500.0, 500.0],
                         "env.id": ["CartPole-v1", "CartPole-v1"], "fp32_note": pd.array([None, None], dtype="str")})
    assert list(with_flags(runs)["fp32_flag"]) == ["", "† not learned"]
