"""The command line of the report scripts (bench/suite/report.py,
bench/iosr/report.py): DIR [--publish DEST]. --help prints the script's
docstring on stdout and exits 0; bad usage is one line on stderr, exit 2, so
that a make rule's log shows what was wrong."""
import os
import sys

SYNOPSIS = "report.py DIR [--publish DEST]"


def parse(argv, doc, needs, maker):
    """(DIR, DEST or None). needs: the files DIR must hold (paths relative to
    it); maker: what writes such a directory, for the message when it does not."""
    def bad(why):
        print("report.py: %s (usage: %s)" % (why, SYNOPSIS), file=sys.stderr)
        sys.exit(2)

    if "--help" in argv or "-h" in argv:
        print(doc.strip())
        sys.exit(0)
    out, dest, i = None, None, 0
    while i < len(argv):
        a = argv[i]
        if a == "--publish":
            if i + 1 >= len(argv):
                bad("missing value for --publish")
            dest, i = argv[i + 1], i + 2
            continue
        if a.startswith("-"):
            bad("unknown option '%s'" % a)
        if out is not None:
            bad("one results directory only, got '%s' and '%s'" % (out, a))
        out, i = a, i + 1
    if out is None:
        bad("no results directory given")
    for need in needs:
        if not os.path.isfile(os.path.join(out, need)):
            bad("%s has no %s (not a results directory of %s)" % (out, need, maker))
    return out, dest
