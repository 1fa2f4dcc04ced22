#!/usr/bin/env python3
"""PyTorch generation with a key/value cache: the baseline beside synthgen's
incremental decoder (runtime/model/decode.go, docs/generation.md).

The models are bench.py's (same classes, same variants and shapes). Each
layer keeps what the next position's attention needs, as a PyTorch user
writes it (preallocated caches, filled one row a step):

  vanilla                     K and V per head: softmax(q·Kᵀ/√dh)·V
  random, fixed_random        V: row t of softmax(R) over j ≤ t
  factorized_random           V: R1[h, t]·R2[h, :t+1]ᵀ
  dense, factorized_dense     V: the logits from x_t alone
  mixtures (a+b)              their components' logits, softmax(mix)-weighted
  aft_full, aft_local,        running factors exp(K_j − κ)⊙V_j and exp(K_j − κ),
  aft_conv, aft_simple        κ a running per-channel maximum (rescaled when
                              it grows): y = σ(q)·(e_w·EKV)/(e_w·EK), e_w the
                              row's exp(w[t, :t+1] − max)
  linear                      S = Σ φ(K_j)V_jᵀ and z = Σ φ(K_j) per head

The prompt is encoded with one batched forward (prefill; its K, V and
factors are taken from the projections the forward computes, through
forward hooks). Beyond n tokens the policy is synthgen's: when the window
is full and a token comes, the last max(1, n/2) tokens (the new one
included) are re-encoded with one prefill, and decoding goes on.

Protocol (that of `go test ./runtime/synth -bench BenchmarkGenerate`, full-
window prompt, and of bench.MeasureGenerate): a prompt of n pseudo-random
bytes, then n bytes generated greedily (temperature 0: the argmax), the
prefill and the re-encodes included in the time; wall and process CPU time
of the whole generation, best of --reps after one untimed warm-up
generation. Prints one JSON line.

  --check   cached logits against the full forward's at every position
            (and after a re-encode), for every supported variant, within
            1e-4·max(1, max|logit|); prints one JSON line, exits 1 on a miss.

Run as bench.py is (Debian's PyTorch, OpenBLAS's OpenMP build):
  LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp OMP_NUM_THREADS=1 \\
      python3 bench/pytorch/generate.py --variant random --n 1024 --d 256 --threads 1
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import LM  # noqa: E402  (the training comparison's models)

AFT = ("aft_full", "aft_local", "aft_conv", "aft_simple")
SUPPORTED = {"vanilla", "random", "fixed_random", "factorized_random", "dense", "factorized_dense",
             "linear", *AFT}


def full_logits(m, idx):
    """LM.forward without the loss: logits [B, t, vocab]."""
    t = idx.shape[1]
    x = m.tok(idx) + m.pos.weight[:t]
    for b in m.blocks:
        x = b(x)
    return m.lnf(x) @ m.tok.weight.T


class Cached:
    """The incremental state of one sequence on LM m (batch 1)."""

    def __init__(self, m):
        self.m = m
        a0 = m.blocks[0].attn
        for c in a0.comps:
            if c not in SUPPORTED:
                raise ValueError(f"variant {c}: no cached generation (supported: {', '.join(sorted(SUPPORTED))})")
        if len(a0.comps) > 1 and any(c in AFT or c == "linear" for c in a0.comps):
            raise ValueError("mixtures of aft_* or linear are not models bench.py builds")
        self.n, self.d, self.h, self.dh = a0.n, a0.d, a0.h, a0.dh
        self.kind = a0.comps[0]
        self.caps = {}
        for b in m.blocks:
            for name in ("q", "k", "v"):
                lin = getattr(b.attn, name, None)
                if lin is not None:
                    lin.register_forward_hook(self._hook(b.attn, name))
        n, d, h, dh = self.n, self.d, self.h, self.dh
        self.lay = []
        for b in m.blocks:
            c = {}
            if "vanilla" in a0.comps:
                c["K"] = torch.zeros(h, n, dh)
            if self.kind in AFT:
                c["EK"], c["EKV"], c["kappa"] = torch.zeros(n, d), torch.zeros(n, d), torch.zeros(d)
            elif self.kind == "linear":
                c["S"], c["z"] = torch.zeros(h, dh, dh), torch.zeros(h, dh)
            else:
                c["V"] = torch.zeros(h, n, dh)
            self.lay.append(c)
        self.toks = []
        self.pos = 0

    def _hook(self, attn, name):
        def hook(mod, inp, out):
            self.caps[(id(attn), name)] = out
        return hook

    def prefill(self, toks):
        """Encodes toks (≤ n) at positions 0… with one batched forward and
        fills the caches; returns the logits at the last position."""
        toks = list(toks)[-self.n:]
        self.toks, t = toks, len(toks)
        m, h, dh = self.m, self.h, self.dh
        idx = torch.tensor([toks])
        x = m.tok(idx) + m.pos.weight[:t]
        for b, c in zip(m.blocks, self.lay):
            a = b.attn
            x = x + a(b.ln1(x))  # the hooks capture q, k, v
            v = self.caps[(id(a), "v")][0]  # [t, d]
            k = self.caps.get((id(a), "k"))
            k = None if k is None else k[0]
            if "V" in c:
                c["V"][:, :t] = v.view(t, h, dh).transpose(0, 1)
            if "K" in c:
                c["K"][:, :t] = k.view(t, h, dh).transpose(0, 1)
            if self.kind in AFT:
                kap = k.max(0).values
                ek = torch.exp(k - kap)
                c["kappa"].copy_(kap)
                c["EK"][:t], c["EKV"][:t] = ek, ek * v
            elif self.kind == "linear":
                fk = (F.elu(k) + 1).view(t, h, dh).transpose(0, 1)  # [h, t, dh]
                vh = v.view(t, h, dh).transpose(0, 1)
                c["S"].copy_(fk.transpose(1, 2) @ vh)
                c["z"].copy_(fk.sum(1))
            x = x + b.fc2(F.gelu(b.fc1(b.ln2(x)), approximate="tanh"))
        self.pos = t
        return (m.lnf(x[0, -1]) @ m.tok.weight.T)

    def next(self, tok):
        """Appends tok and returns the logits at its position; on a full
        window re-encodes the last max(1, n/2) tokens first."""
        if self.pos == self.n:
            keep = max(1, self.n // 2)
            return self.prefill(self.toks[self.n - keep + 1:] + [tok])
        self.toks.append(tok)
        m, t = self.m, self.pos
        x = m.tok.weight[tok] + m.pos.weight[t]  # [d]
        for b, c in zip(m.blocks, self.lay):
            x = x + b.attn.o(self._attn(b.attn, c, b.ln1(x), t))
            x = x + b.fc2(F.gelu(b.fc1(b.ln2(x)), approximate="tanh"))
        self.pos = t + 1
        return m.lnf(x) @ m.tok.weight.T

    def _attn(self, a, c, x, t):
        """The attention's output at position t (before o), x [d]."""
        h, dh, s = self.h, self.dh, t + 1
        v = a.v(x)
        if self.kind in AFT:
            q, k = a.q(x), a.k(x)
            kap = c["kappa"]
            if t == 0:
                kap.copy_(k)
            elif bool((k > kap).any()):
                new = torch.maximum(kap, k)
                f = torch.exp(kap - new)
                c["EK"][:t] *= f
                c["EKV"][:t] *= f
                kap.copy_(new)
            ek = torch.exp(k - kap)
            c["EK"][t], c["EKV"][t] = ek, ek * v
            if self.kind == "aft_conv":
                lag = a.lag[t, :s]
                w = torch.where(a.inwin[t, :s], a.u[:, lag], torch.zeros(()))  # [h, s]
                ew = torch.exp(w - w.max(1, keepdim=True).values)
                num = torch.einsum("hj,jhc->hc", ew, c["EKV"][:s].view(s, h, dh)).reshape(-1)
                den = torch.einsum("hj,jhc->hc", ew, c["EK"][:s].view(s, h, dh)).reshape(-1)
            else:
                if self.kind == "aft_simple":
                    w = torch.zeros(s)
                elif self.kind == "aft_local":
                    w = torch.where(a.inwin[t, :s], a.w[t, :s], torch.zeros(()))
                else:
                    w = a.w[t, :s]
                ew = torch.exp(w - w.max())
                num, den = ew @ c["EKV"][:s], ew @ c["EK"][:s]
            return torch.sigmoid(q) * num / den
        if self.kind == "linear":
            fq, fk = F.elu(a.q(x)).view(h, dh) + 1, F.elu(a.k(x)).view(h, dh) + 1
            vh = v.view(h, dh)
            c["S"] += fk.unsqueeze(2) * vh.unsqueeze(1)
            c["z"] += fk
            num = (fq.unsqueeze(1) @ c["S"]).squeeze(1)
            den = (fq * c["z"]).sum(-1, keepdim=True) + 1e-6
            return (num / den).reshape(-1)
        c["V"][:, t] = v.view(h, dh)
        if "K" in c:
            c["K"][:, t] = a.k(x).view(h, dh)
        logits = []
        for comp in a.comps:
            if comp == "vanilla":
                q = a.q(x).view(h, 1, dh)
                logits.append((q @ c["K"][:, :s].transpose(1, 2)).squeeze(1) / math.sqrt(dh))
            elif comp in ("random", "fixed_random"):
                logits.append(a.R[:, t, :s])
            elif comp == "factorized_random":
                logits.append((a.R2[:, :s] @ a.R1[:, t].unsqueeze(2)).squeeze(2))
            elif comp == "dense":
                g = F.relu(a.w1(x)).view(h, dh)
                logits.append(F.linear(g, a.w2.weight[:s], a.w2.bias[:s]))
            elif comp == "factorized_dense":
                g = F.relu(a.w1(x)).view(h, dh)
                fa, fb = a.fa(g), a.fb(g)
                logits.append((fa.repeat_interleave(a.b, -1) * fb.repeat(1, a.a))[:, :s])
        if len(logits) > 1:
            wts = torch.softmax(a.mix, 0)
            lg = sum(wts[i] * l for i, l in enumerate(logits))
        else:
            lg = logits[0]
        y = (torch.softmax(lg, -1).unsqueeze(1) @ c["V"][:, :s]).squeeze(1)  # [h, dh]
        return y.reshape(-1)


def generate(dec, prompt, size):
    """Greedy: size bytes after prompt."""
    out = []
    lg = dec.prefill(prompt)
    for i in range(size):
        tok = int(torch.argmax(lg))
        out.append(tok)
        if i + 1 < size:
            lg = dec.next(tok)
    return out


def build(variant, n, d, heads, layers, ffn, k, a, b, window, seed=1, perturb=0.0):
    torch.manual_seed(seed)
    m = LM(variant, n, d, heads, layers, ffn=ffn or None, k=k, a=a, b=b, window=window)
    if perturb:
        with torch.no_grad():
            for p in m.parameters():
                p.add_(torch.randn_like(p) * perturb)
    return m.eval()


def check(variants, n, d, heads, layers, window):
    """Cached logits against the full forward's, at every position of a
    window and after a re-encode, per variant: worst relative error."""
    res, ok = {}, True
    for v in variants:
        m = build(v, n, d, heads, layers, 0, 4, 6, n // 6, window, seed=3, perturb=0.3)  # factorized_dense: a·b = n
        dec = Cached(m)
        g = torch.Generator().manual_seed(5)
        toks = torch.randint(0, 256, (n + 3,), generator=g).tolist()
        ref = full_logits(m, torch.tensor([toks[:n]]))[0]
        worst = 0.0
        p = 5
        got = [dec.prefill(toks[:p])]
        got += [dec.next(tok) for tok in toks[p:n]]
        for i, lg in enumerate(got):
            r = ref[p - 1 + i]
            worst = max(worst, ((lg - r).abs().max() / max(1.0, r.abs().max().item())).item())
        # Past the window: the re-encode of the last n/2 tokens, then a step.
        keep = max(1, n // 2)
        for j in range(n, n + 2):
            lg = dec.next(toks[j])
            ctx = toks[j - dec.pos + 1:j + 1]
            r = full_logits(m, torch.tensor([ctx]))[0, -1]
            worst = max(worst, ((lg - r).abs().max() / max(1.0, r.abs().max().item())).item())
            assert dec.pos == (keep if j == n else keep + 1), (j, dec.pos)
        res[v] = worst
        ok = ok and worst <= 1e-4
    return ok, res


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--variant", default="random")
    p.add_argument("--n", type=int, default=128)
    p.add_argument("--d", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--ffn", type=int, default=0, help="feed-forward width (default 4·d)")
    p.add_argument("--k", type=int, default=8, help="factorized_random's rank")
    p.add_argument("--a", type=int, default=16, help="factorized_dense's a")
    p.add_argument("--b", type=int, default=8, help="factorized_dense's b")
    p.add_argument("--window", type=int, default=16, help="aft_local's and aft_conv's window")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--prompt", type=int, default=0, help="prompt bytes (default n: a full window)")
    p.add_argument("--len", type=int, default=0, help="bytes to generate (default n)")
    p.add_argument("--reps", type=int, default=1, help="timed generations (the best counts), after one untimed")
    p.add_argument("--check", action="store_true",
                   help="check cached logits against the full forward for --variants (small sizes) and exit")
    p.add_argument("--variants", default=",".join(sorted(SUPPORTED)) + ",random+vanilla,random+dense",
                   help="with --check: the variants checked")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    with torch.inference_mode():
        if a.check:
            ok, res = check(a.variants.split(","), 24, 32, 4, 2, 4)
            print(json.dumps({"ok": ok, "tolerance": 1e-4, "max_rel_err": res, "torch": torch.__version__}))
            sys.exit(0 if ok else 1)
        m = build(a.variant, a.n, a.d, a.heads, a.layers, a.ffn, a.k, a.a, a.b, a.window, perturb=0.05)
        dec = Cached(m)
        pl, size = a.prompt or a.n, a.len or a.n
        g = torch.Generator().manual_seed(4)
        prompt = torch.randint(0, 256, (pl,), generator=g).tolist()
        generate(dec, prompt, min(size, 8))  # warm-up
        wall, cpu = float("inf"), float("inf")
        for _ in range(max(1, a.reps)):
            w0, c0 = time.perf_counter(), time.process_time()
            generate(dec, prompt, size)
            w1, c1 = time.perf_counter(), time.process_time()
            wall, cpu = min(wall, w1 - w0), min(cpu, c1 - c0)
    print(json.dumps({"variant": a.variant, "n": a.n, "prompt": pl, "bytes": size, "threads": a.threads,
                      "bytes_per_s": size / wall, "bytes_per_cpu_s": size / cpu if cpu > 0 else 0.0,
                      "wall_s": wall, "cpu_s": cpu, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
