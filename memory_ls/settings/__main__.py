import sys

from .docs import main

sys.exit(main())
