"""Entry point the python language host runs for the plugin: `python <this folder> ENGINE_ADDRESS [flags]`.

It holds no logic: triton_gke.provider is the provider (the same module `triton-gke provider` runs).
"""

import sys

from triton_gke.provider import main

if __name__ == "__main__":
    sys.exit(main())
