import sys

from buildgen.cli import main

sys.exit(main())
