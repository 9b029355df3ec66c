import sys

from reactlab.cli import main

sys.exit(main())
