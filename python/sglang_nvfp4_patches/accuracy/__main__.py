"""``python -m sglang_nvfp4_patches.accuracy {run,compare} ...``."""

import sys

from sglang_nvfp4_patches.accuracy.cli import main

sys.exit(main())
