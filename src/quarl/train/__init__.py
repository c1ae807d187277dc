"""Training, the policy cache, checkpoints, keep-best and curves.

The files of a policy folder in the cache (`quarl.train.cache`), written by its training
(`quarl.train.trainer`); named here so that readers (collation, the pipeline) need no torch.
"""

MODEL_FILE = "model.zip"  # SB3's format
NORMALIZE_FILE = "vecnormalize.pkl"  # observation normalisation, where the policy was trained with it
META_FILE = "meta.json"  # key, spec, training time, versions, the kept step
CURVE_FILE = "curve.json"  # return and length of every training episode
