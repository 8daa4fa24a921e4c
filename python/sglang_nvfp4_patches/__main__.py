import sys

from sglang_nvfp4_patches.cli import main

sys.exit(main())
