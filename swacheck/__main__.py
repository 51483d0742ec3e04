from swacheck.cli import run

run()
