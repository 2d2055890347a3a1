import sys

from portable_spec.cli import main

sys.exit(main())
