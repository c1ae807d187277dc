"""The files of a policy folder in the cache (quarl.policies), written by its training (quarl.training)."""

MODEL_FILE = "model.zip"  # SB3's format
NORMALIZE_FILE = "vecnormalize.pkl"  # observation normalisation, where the policy was trained with it
META_FILE = "meta.json"  # key, spec, training time, versions, the kept step
CURVE_FILE = "curve.json"  # return and length of every training episode
