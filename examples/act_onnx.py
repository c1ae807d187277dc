"""Act in a Gymnasium environment with a policy exported by `quarl.deploy.onnx_export`.

Needs only numpy, onnxruntime and gymnasium (not quarl, Stable-Baselines3 or torch):

    python examples/act_onnx.py policy.onnx                 # the env id stored in the file
    python examples/act_onnx.py policy.onnx --env CartPole-v1 --episodes 5 --seed 1
"""

import argparse
import json

import gymnasium as gym
import numpy as np
import onnxruntime as ort


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("policy", help="an .onnx file written by quarl.deploy.onnx_export")
    parser.add_argument("--env", help="Gymnasium id (default: the one stored in the file)")
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(args.policy, options, providers=["CPUExecutionProvider"])
    meta = session.get_modelmeta().custom_metadata_map
    env_id = args.env or meta.get("quarl.env_id")
    if not env_id:
        parser.error("the file stores no environment id: pass --env")
    obs_dtype = np.dtype(meta.get("quarl.obs_dtype", "float32"))
    print(f"{args.policy}: {meta.get('quarl.algo', '?')} policy, {meta.get('quarl.precision', '?')}, "
          f"observations {json.loads(meta.get('quarl.obs_shape', '[]'))}, env {env_id}")

    env = gym.make(env_id)
    for episode in range(args.episodes):
        obs, _ = env.reset(seed=args.seed + episode)
        total, done = 0.0, False
        while not done:
            action = session.run(["action"], {"obs": np.asarray(obs, dtype=obs_dtype)[None]})[0][0]
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        print(f"episode {episode} (seed {args.seed + episode}): return {total:.1f}")
    env.close()


if __name__ == "__main__":
    main()
