import sys

from swacheck.cli import main

sys.exit(main())
