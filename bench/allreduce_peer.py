"""The peer of `unet-pipeline bench replicas`: torch.distributed.all_reduce of
the bytes one stage's copies exchange, over Gloo on loopback, from Python on
the same LibTorch. Starts --ranks processes; rank 0 prints one {"step_s": s}
line per timed all-reduce (after --warmup untimed ones).
"""
import argparse
import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(rank, args, port):
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=args.ranks
    )
    x = torch.ones(args.numel, dtype=torch.float32)
    for i in range(args.warmup + args.iters):
        dist.barrier()
        start = time.perf_counter()
        dist.all_reduce(x)
        took = time.perf_counter() - start
        if rank == 0 and i >= args.warmup:
            print(json.dumps({"step_s": took}), flush=True)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--numel", type=int, required=True, help="float32 elements")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    args = p.parse_args()
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    mp.spawn(run, args=(args, free_port()), nprocs=args.ranks, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
