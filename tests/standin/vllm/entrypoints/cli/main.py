"""Stand-in `vllm` CLI (vllm/entrypoints/cli/main.py): `--version`, `serve`, `bench serve`.

The parser is the release's (vllm._flags): an unknown flag is "main.py: error: unrecognized
arguments: ..." with the top-level usage and exit 2, as the release prints it when run as
`python -m vllm.entrypoints.cli.main`; the other subcommands parse but do nothing here.
"""

from __future__ import annotations

import sys

from vllm import __version__
from vllm._flags import build_parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser(__version__).parse_args(sys.argv[1:] if argv is None else argv)
    if args.subparser == "serve":
        from vllm._serve import serve
        return serve(args)
    if args.subparser == "bench" and args.bench_type == "serve":
        from vllm._bench import bench_serve
        return bench_serve(args)
    if args.subparser is None:
        build_parser(__version__).print_help()
        return 0
    print(f"the vLLM stand-in does not run `{args.subparser}`", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
