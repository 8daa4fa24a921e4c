import sys

from sglang_nvfp4_patches.console import main

sys.exit(main())
