"""Records for the store's tests, and the writer process of the concurrent-writers test: this module
imports the store alone (no torch), so each spawned writer starts in a fraction of a second."""

from quarl.store.sqlite import Store


def make_record(key: str, bits: int = 8, reward: float = 100.0) -> dict:
    """A done PTQ record of DQN on CartPole with two episodes."""
    config = {"algo": {"name": "dqn", "hyperparams": {"net": [64, 64]}}, "quant": {"method": "ptq", "bits": bits},
              "seed": 0}
    return {
        "run": {"cell_key": key, "status": "done", "algo": "dqn", "env": "cartpole", "quant": "ptq",
                "reward_mean": reward, "n_episodes": 2, "versions": {"torch": "x"}},
        "config": config,
        "episodes": [{"episode": 0, "seed": 11, "reward": reward - 1, "length": 9},
                     {"episode": 1, "seed": 12, "reward": reward + 1, "length": 10}],
    }


def writer(path: str, worker: int, count: int) -> None:
    """Write `count` records of its own (with a column only this worker adds) to the store at `path`."""
    store = Store(path)
    for i in range(count):
        record = make_record(f"w{worker}-{i}", bits=2 + i % 7)
        record["config"][f"only_worker_{worker}"] = i  # new columns appear concurrently too
        store.write(record)
