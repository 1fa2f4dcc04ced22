#!/usr/bin/env python3
"""PyTorch reference figures for synthgen's benchmarks (bench/, `synth bench`).

Reimplements the model card (docs/model.md) for the variants of the
comparison table, and times on this CPU:
  * softmax(causal_mask(B))·V, forward and forward+backward, n 256, dh 64,
    32 (sequence × head) problems, 1 thread, nominal FLOPs 2·n²·dh (fwd),
    6·n²·dh (fwd+bwd);
  * a whole training step (forward, backward, AdamW) at batch 16, 2 threads,
    in tokens/s, per variant;
  * with --one VARIANT, one configuration (any size), printed as one JSON
    line with the process's peak resident set: what `synth steps` runs for
    each row of its table; --autocast bf16 runs it under
    torch.autocast("cpu", dtype=torch.bfloat16);
  * with --softmax-value, the softmax-value alone as one JSON line (what
    `synth bench` prints beside its kernels);
  * with --probe-gemm, a float32 GEMM's GFLOP/s and error as one JSON line:
    what synthgen's bench package runs under each OPENBLAS_CORETYPE to
    choose OpenBLAS's kernels (bench/openblas.go).
generate.py, beside it, generates with a key/value cache on these models
(the baseline of `synth bench -generate`).

Run with Debian's PyTorch and OpenBLAS (reference BLAS is ~20× slower):
  apt-get install python3-torch libopenblas0-openmp
  LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp OMP_NUM_THREADS=2 \
      OPENBLAS_CORETYPE=SKYLAKEX /usr/bin/python3 bench/pytorch/bench.py [--n 128 --d 128 --heads 4 --layers 4]
OpenBLAS 0.3.21 picks its kernels by CPU model and falls back to generic
ones (Core: Prescott, with OPENBLAS_VERBOSE=2) on CPUs it does not know:
set OPENBLAS_CORETYPE to the core that `synth steps` or `synth bench`
print as chosen, or run the figures through them.
"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, variant, n, d, heads, k=8, a=16, b=8, window=16):
        super().__init__()
        self.comps = variant.split("+")
        self.n, self.d, self.h, self.dh = n, d, heads, d // heads
        self.window = window
        self.v, self.o = nn.Linear(d, d), nn.Linear(d, d)
        c = set(self.comps)
        if c & {"vanilla", "aft_full", "aft_local", "aft_conv", "aft_simple", "linear"}:
            self.q, self.k = nn.Linear(d, d), nn.Linear(d, d)
        if c & {"dense", "factorized_dense"}:
            self.w1 = nn.Linear(d, d)
        if "dense" in c:
            self.w2 = nn.Linear(self.dh, n)
        if "factorized_dense" in c:
            self.a, self.b = a, b
            self.fa, self.fb = nn.Linear(self.dh, a), nn.Linear(self.dh, b)
        if c & {"random", "fixed_random"}:
            self.R = nn.Parameter(torch.randn(heads, n, n) * (1.0 if "fixed_random" in c else 0.02),
                                  requires_grad="fixed_random" not in c)
        if "factorized_random" in c:
            self.R1 = nn.Parameter(torch.randn(heads, n, k) * 0.02)
            self.R2 = nn.Parameter(torch.randn(heads, n, k) * 0.02)
        if c & {"aft_full", "aft_local"}:
            self.w = nn.Parameter(torch.zeros(n, n))
        if "aft_conv" in c:
            self.u = nn.Parameter(torch.zeros(heads, window))
        if c & {"aft_local", "aft_conv"}:
            lag = torch.arange(n).unsqueeze(1) - torch.arange(n).unsqueeze(0)  # i − j
            self.register_buffer("inwin", (lag >= 0) & (lag < window))
            self.register_buffer("lag", lag.clamp(0, window - 1))
        if len(self.comps) > 1:
            self.mix = nn.Parameter(torch.zeros(len(self.comps)))
        self.register_buffer("mask", torch.triu(torch.ones(n, n, dtype=torch.bool), 1))

    def heads(self, x):  # [B, t, d] -> [B, h, t, dh]
        B, t, _ = x.shape
        return x.view(B, t, self.h, self.dh).transpose(1, 2)

    def forward(self, x):
        B, t, d = x.shape
        v = self.v(x)
        comp = self.comps[0]
        if comp in ("aft_full", "aft_local", "aft_simple"):
            # The separable form (labml's): exp(w − rowmax) and exp(K − max)
            # as matrix products; aft_local keeps w inside the window and 0
            # (not −inf) outside it, aft_simple has w ≡ 0.
            q, k = self.q(x), self.k(x)
            if comp == "aft_simple":
                w = torch.zeros(t, t)
            elif comp == "aft_local":
                w = torch.where(self.inwin[:t, :t], self.w[:t, :t], torch.zeros(()))
            else:
                w = self.w[:t, :t]
            w = w.masked_fill(self.mask[:t, :t], float("-inf"))
            m = k.max(dim=1, keepdim=True).values  # [B,1,d]
            wm = w.max(dim=1, keepdim=True).values  # [t,1]
            ew = torch.exp(w - wm)  # [t,t]
            ek = torch.exp(k - m)  # [B,t,d]
            y = torch.sigmoid(q) * (ew @ (ek * v)) / (ew @ ek)
            return self.o(y)
        if comp == "aft_conv":
            # Per head h, w_ij = u[h, i − j] inside the window, 0 outside.
            q, k = self.heads(self.q(x)), self.heads(self.k(x))
            w = torch.where(self.inwin[:t, :t], self.u[:, self.lag[:t, :t]], torch.zeros(()))  # [h,t,t]
            w = w.masked_fill(self.mask[:t, :t], float("-inf"))
            m = k.max(dim=2, keepdim=True).values  # [B,h,1,dh]
            ew = torch.exp(w - w.max(dim=2, keepdim=True).values)  # [h,t,t]
            ek = torch.exp(k - m)
            y = torch.sigmoid(q) * (ew @ (ek * self.heads(v))) / (ew @ ek)
            return self.o(y.transpose(1, 2).reshape(B, t, d))
        if comp == "linear":
            fq, fk = F.elu(self.heads(self.q(x))) + 1, F.elu(self.heads(self.k(x))) + 1
            vh = self.heads(v)
            # The causal sum written as a masked product (BLAS-friendly at
            # these n; the O(n·dh²) scan is slower in PyTorch).
            a = (fq @ fk.transpose(-1, -2)).masked_fill(self.mask[:t, :t], 0.0)
            num = a @ vh
            den = a.sum(-1, keepdim=True) + 1e-6
            y = (num / den).transpose(1, 2).reshape(B, t, d)
            return self.o(y)
        logits = []
        for c in self.comps:
            if c == "vanilla":
                logits.append(self.heads(self.q(x)) @ self.heads(self.k(x)).transpose(-1, -2) / math.sqrt(self.dh))
            elif c in ("random", "fixed_random"):
                logits.append(self.R[:, :t, :t].unsqueeze(0).expand(B, -1, -1, -1))
            elif c == "factorized_random":
                logits.append((self.R1[:, :t] @ self.R2[:, :t].transpose(-1, -2)).unsqueeze(0).expand(B, -1, -1, -1))
            elif c == "dense":
                g = self.heads(F.relu(self.w1(x)))
                logits.append(self.w2(g)[..., :t])
            elif c == "factorized_dense":
                g = self.heads(F.relu(self.w1(x)))
                fa, fb = self.fa(g), self.fb(g)
                logits.append((fa.repeat_interleave(self.b, -1) * fb.repeat(1, 1, 1, self.a))[..., :t])
        if len(logits) > 1:
            wts = torch.softmax(self.mix, 0)
            s = sum(wts[i] * l for i, l in enumerate(logits))
        else:
            s = logits[0]
        s = s.masked_fill(self.mask[:t, :t], float("-inf"))
        y = torch.softmax(s, -1) @ self.heads(v)
        return self.o(y.transpose(1, 2).reshape(B, t, d))


class Block(nn.Module):
    def __init__(self, variant, n, d, heads, ffn, **kw):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = Attention(variant, n, d, heads, **kw)
        self.fc1, self.fc2 = nn.Linear(d, ffn), nn.Linear(ffn, d)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class LM(nn.Module):
    def __init__(self, variant, n, d, heads, layers, vocab=256, ffn=None, **kw):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(n, d)
        self.blocks = nn.ModuleList(Block(variant, n, d, heads, ffn or 4 * d, **kw) for _ in range(layers))
        self.lnf = nn.LayerNorm(d)

    def forward(self, idx, tgt):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos.weight[:t]
        for b in self.blocks:
            x = b(x)
        logits = self.lnf(x) @ self.tok.weight.T
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1))


def time_it(fn, reps):
    fn()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def probe_gemm(size=1024, reps=3):
    """A float32 GEMM's best GFLOP/s, and its largest error on a corner
    against a float64 product made without BLAS, relative to the largest
    entry (a core that computes wrong results is no candidate)."""
    torch.set_num_threads(1)
    torch.manual_seed(1)
    a, b = torch.randn(size, size), torch.randn(size, size)
    c = a @ b
    sec = time_it(lambda: a @ b, reps)
    m = 48
    ref = (a[:m].double().unsqueeze(2) * b[:, :m].double().unsqueeze(0)).sum(1)
    err = ((c[:m, :m].double() - ref).abs().max() / ref.abs().max()).item()
    return 2 * size**3 / sec / 1e9, err


def softmax_value_rates(n=256, dh=64, problems=32):
    """softmax(causal_mask(B))·V on one thread: forward and forward+backward
    GFLOP/s, counted as 2·n²·dh and 6·n²·dh per problem."""
    torch.set_num_threads(1)
    b = torch.randn(problems, n, n, requires_grad=True)
    v = torch.randn(problems, n, dh, requires_grad=True)
    mask = torch.triu(torch.ones(n, n, dtype=torch.bool), 1)
    fwd = lambda: torch.softmax(b.masked_fill(mask, float("-inf")), -1) @ v
    def both():
        y = fwd()
        y.backward(torch.ones_like(y))
    tf, tb = time_it(lambda: fwd(), 20), time_it(both, 20)
    return problems*2*n*n*dh/tf/1e9, problems*6*n*n*dh/tb/1e9


def softmax_value(n=256, dh=64, problems=32):
    f, fb = softmax_value_rates(n, dh, problems)
    print(f"softmax-value n {n} dh {dh} x{problems}, 1 thread: forward {f:.1f} GFLOP/s, "
          f"forward+backward {fb:.1f} GFLOP/s")


def train_step(variant, n, d, heads, layers, batch, threads, reps=5, autocast=None, **kw):
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    m = LM(variant, n, d, heads, layers, **kw)
    opt = torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    idx = torch.randint(0, 256, (batch, n))
    tgt = torch.randint(0, 256, (batch, n))
    def step():
        opt.zero_grad(set_to_none=True)
        if autocast == "bf16":
            # Mixed precision as PyTorch recommends it on CPU: the forward
            # (and the loss) under autocast, backward and AdamW outside it,
            # the weights staying float32.
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = m(idx, tgt)
        else:
            loss = m(idx, tgt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
    sec = time_it(step, reps)
    return batch * n / sec


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=128)
    p.add_argument("--d", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--variants", default="vanilla,random,dense,factorized_random,factorized_dense,random+vanilla,aft_full,linear")
    p.add_argument("--one", metavar="VARIANT",
                   help="time one configuration only and print one JSON line (synth steps runs each row so)")
    p.add_argument("--ffn", type=int, default=0, help="feed-forward width (default 4·d)")
    p.add_argument("--k", type=int, default=8, help="factorized_random's rank")
    p.add_argument("--a", type=int, default=16, help="factorized_dense's a")
    p.add_argument("--b", type=int, default=8, help="factorized_dense's b")
    p.add_argument("--window", type=int, default=16, help="aft_local's and aft_conv's window")
    p.add_argument("--reps", type=int, default=5, help="timed steps (the best counts)")
    p.add_argument("--autocast", choices=["bf16"], help="with --one: the step under torch.autocast(\"cpu\", dtype=torch.bfloat16)")
    p.add_argument("--softmax-value", action="store_true", help="time softmax-value only (--n, --dh, --problems; 1 thread) and print one JSON line")
    p.add_argument("--dh", type=int, default=64, help="with --softmax-value: head width")
    p.add_argument("--problems", type=int, default=32, help="with --softmax-value: (sequence × head) problems")
    p.add_argument("--probe-gemm", action="store_true", help="time a 1024² float32 GEMM on 1 thread and print one JSON line (OpenBLAS core choice)")
    a = p.parse_args()
    import json
    if a.probe_gemm:
        gflops, err = probe_gemm()
        print(json.dumps({"gflops": gflops, "rel_err": err, "torch": torch.__version__}))
        return
    if a.softmax_value:
        f, fb = softmax_value_rates(a.n, a.dh, a.problems)
        print(json.dumps({"forward_gflops": f, "forward_backward_gflops": fb, "torch": torch.__version__}))
        return
    if a.one:
        import resource
        tps = train_step(a.one, a.n, a.d, a.heads, a.layers, a.batch, a.threads, reps=a.reps, autocast=a.autocast,
                         ffn=a.ffn or None, k=a.k, a=a.a, b=a.b, window=a.window)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
        print(json.dumps({"tokens_per_s": tps, "peak_rss_kib": rss, "torch": torch.__version__}))
        return
    blas = [l.strip() for l in torch.__config__.show().splitlines() if "BLAS" in l]
    print(f"torch {torch.__version__}; {'; '.join(blas) or 'BLAS unknown'}")
    softmax_value()
    for v in a.variants.split(","):
        tps = train_step(v, a.n, a.d, a.heads, a.layers, a.batch, a.threads)
        print(f"train step {v}: n {a.n} d {a.d} heads {a.heads} layers {a.layers} batch {a.batch}, {a.threads} threads: {tps:,.0f} tokens/s")


if __name__ == "__main__":
    main()
