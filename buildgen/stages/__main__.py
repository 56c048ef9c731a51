import sys

from buildgen.stages.runner import main

sys.exit(main())
