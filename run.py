"""Train or load a policy, quantize it, evaluate it and record the result: `python run.py --help`."""

from quarl.app import main

if __name__ == "__main__":
    main()
