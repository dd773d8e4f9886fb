"""One rank of the 2-process gloo DDP runs of test_torch.py (run as a script).

Trains a small MLP for 3 steps under DistributedDataParallel with small buckets, plain or with
ccsim.torch.comm_hook(SCHEME), and pickles each step's gradients and, per hook call, the step, the
bucket's parameters (positions in model.parameters()), the rank's local bucket before the hook,
what the hook gathered and what it returned.
Usage: ddp_worker.py RANK WORLD PORT SCHEME OUT_FILE   (SCHEME "none": DDP's own all-reduce)
"""

import os
import pickle
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import ccsim.torch


def recording(hook, model, calls, step):
    """The hook, recording each call (DDP reads the parameter's name, `bucket`)."""
    positions = {id(p): i for i, p in enumerate(model.parameters())}

    def hook_and_record(state, bucket):
        local = bucket.buffer().detach().clone()
        fut = hook(state, bucket)
        index, gathered, out = hook.record[-1]
        calls.append({"step": step[0], "index": index, "params": [positions[id(p)] for p in bucket.parameters()],
                      "local": local, "gathered": gathered, "out": out})
        return fut

    return hook_and_record


def main() -> None:
    rank, world, port, scheme, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", port
    torch.set_num_threads(1)
    ccsim.set_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    # 1.2 MB of gradient: more than DDP's 1 MiB first bucket, so there are several buckets.
    model = nn.Sequential(nn.Linear(32, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    ddp = DistributedDataParallel(model, bucket_cap_mb=0.25)
    hook, calls, step = None, [], [0]
    if scheme != "none":
        hook = ccsim.torch.comm_hook(scheme, seed=5)
        hook.record = []
        ddp.register_comm_hook(hook.state, recording(hook, model, calls, step))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(100 + rank)
    grads = []
    for step[0] in range(3):
        x = torch.randn(16, 32, generator=gen)
        y = torch.randint(0, 10, (16,), generator=gen)
        opt.zero_grad()
        nn.functional.cross_entropy(ddp(x), y).backward()
        grads.append([p.grad.detach().clone() for p in model.parameters()])
        opt.step()
    stats = sorted(hook.stats) if hook else None
    with open(out, "wb") as f:
        pickle.dump({"grads": grads, "calls": calls, "stats": stats}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
