#!/usr/bin/env python3
"""Where PyTorch's training step spends its time (torch.profiler), for one
variant at the sizes of bench.py: the counterpart of `go test ./bench -bench
TrainStep -cpuprofile` + `go tool pprof -top`.

  LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp OMP_NUM_THREADS=2 \\
      /usr/bin/python3 bench/pytorch/profile.py --variant random
"""
import argparse
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import LM  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--variant", default="random")
    p.add_argument("--n", type=int, default=128)
    p.add_argument("--d", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--top", type=int, default=20)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    m = LM(a.variant, a.n, a.d, a.heads, a.layers)
    opt = torch.optim.AdamW([q for q in m.parameters() if q.requires_grad], lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    idx = torch.randint(0, 256, (a.batch, a.n))
    tgt = torch.randint(0, 256, (a.batch, a.n))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = m(idx, tgt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()

    step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(a.steps):
            step()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=a.top))


if __name__ == "__main__":
    main()
