"""One rank of `specbench probe`: joins the process group the parent set up (RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT in its environment) and times `all_reduce` at each size.

Run as a script by `jobs.evidence.collectives` (never imported by it), so it needs only torch
and the standard library. Rank 0 prints one JSON line per size as soon as it is measured,
`{"bytes": B, "times_us": [...]}`, so that a probe stopped at its timeout still says which sizes
completed. Each timed iteration starts after a barrier (and, on CUDA, a synchronize) and ends
when the reduced tensor is ready on this rank; on CUDA it is timed by CUDA events, so that the
host's launch and synchronisation are not in it.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import sys
import time


def _args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="rank_worker")
    parser.add_argument("--backend", choices=("nccl", "gloo"), required=True)
    parser.add_argument("--sizes", required=True, help="bytes per message, comma-separated")
    parser.add_argument("--iters", type=int, required=True)
    parser.add_argument("--warmup", type=int, required=True)
    parser.add_argument("--timeout", type=float, required=True, help="torch's own, in seconds")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    gc.disable()  # torch's import frees nothing: the cycle collector's passes over it are waste
    import torch
    import torch.distributed as dist

    gc.freeze()  # torch's objects are never walked again (jobs.startup says why; this script
    gc.enable()  # imports nothing of specbench's, so it does the same itself)

    args = _args(argv)
    rank = int(os.environ["RANK"])
    cuda = args.backend == "nccl"
    if cuda:
        torch.cuda.set_device(rank)
    device = torch.device("cuda", rank) if cuda else torch.device("cpu")
    dist.init_process_group(backend=args.backend, rank=rank,
                            world_size=int(os.environ["WORLD_SIZE"]),
                            timeout=datetime.timedelta(seconds=args.timeout))

    def sync() -> None:
        if cuda:
            dist.barrier(device_ids=[rank])
            torch.cuda.synchronize()
        else:
            dist.barrier()

    if cuda:  # one pair, recorded again at each call
        start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]

    def reduce_timed(tensor: torch.Tensor) -> float:
        """Microseconds the all-reduce of `tensor` took. On CUDA: between two events on the
        current stream, which `all_reduce` makes wait for NCCL's own. The host's clock also
        timed the launch and the synchronisation there: on an H200 with one rank, which has
        nothing to send, a call read 41-53 us by the clock and 22-23 us by events, where a
        decode step's all-reduce over 8 GPUs takes 30-250 us (tests/fixtures/h200). On the
        CPU: the host's clock."""
        if not cuda:
            began = time.perf_counter()
            dist.all_reduce(tensor)
            return (time.perf_counter() - began) * 1e6
        start.record()
        dist.all_reduce(tensor)
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)) * 1e3

    try:
        for size in (int(s) for s in args.sizes.split(",")):
            # Whole float32 words where the size allows it, else bytes: the message is exactly
            # `size` bytes either way.
            dtype, width = (torch.float32, 4) if size % 4 == 0 else (torch.uint8, 1)
            tensor = torch.zeros(size // width, dtype=dtype, device=device)
            times = []
            for i in range(args.warmup + args.iters):
                sync()
                took = reduce_timed(tensor)
                if i >= args.warmup:
                    times.append(took)
            if rank == 0:
                print(json.dumps({"bytes": size, "times_us": times}), flush=True)
        sync()
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # Every result is printed and flushed, the group destroyed: torch's own interpreter shutdown
    # took 2-5 s more per rank on a busy host, for nothing the probe reads.
    os._exit(code)
