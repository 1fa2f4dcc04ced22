// Package kernels is the runtime's side of the generated code: the kernel
// signatures every generated package implements, the registry that
// generated packages fill from their init functions, and the dispatch that
// picks, per kernel, the best instruction set this CPU has.
//
// Layout conventions shared by every kernel (the generated code bakes the
// spec's sizes in as constants; t ≤ N is the only size passed at run time):
//
//   - Activation matrices are [t, D] row-major; head h of one is the slice
//     starting at column h·DH, read with row stride D.
//   - Logit and probability matrices of one (sequence, head) are [t, N]
//     row-major with row stride N. Only the causal lower triangle j ≤ i < t
//     is read or written; kernels never touch entries with j > i. A
//     bidirectional spec's ("causal": false, Spec.Bidirectional) kernels
//     take the whole square i, j < t instead: the formulas below hold
//     with "j ≤ i" read as "j < t" (and Σ_{j≤i<t} as Σ_{i<t}), and no
//     entry with j ≥ t is touched.
//   - "Overwrite" outputs are written whole; "accumulate" outputs are added to.
//
// Each kernel type's doc comment below gives its exact formula.
package kernels

// SoftmaxValueFunc is the fused causal softmax and value product for one
// (sequence, head): for every row i < t,
//
//	a[i·N+j] = exp(b[i·N+j] − m_i) / Σ_{j'≤i} exp(b[i·N+j'] − m_i),  j ≤ i, m_i = max_{j≤i} b[i·N+j]
//	y[i·D+c] = Σ_{j≤i} a[i·N+j] · v[j·D+c],                            c < DH
//
// a may be the same slice as b. Entries of b may be −Inf (an extra mask); a
// row whose entries are all −Inf gives a = 0 and y = 0.
type SoftmaxValueFunc func(t int, b, a, v, y []float32)

// SoftmaxValueBackFunc is the backward of SoftmaxValueFunc. From the kept
// probabilities a, the values v and the output gradient dy it writes
// (overwrite)
//
//	dv[j·D+c] = Σ_{j≤i<t} a[i·N+j] · dy[i·D+c]
//	db[i·N+j] = a[i·N+j] · (g_ij − Σ_{j'≤i} a[i·N+j'] · g_ij'),  g_ij = Σ_c dy[i·D+c] · v[j·D+c]
//
// db may be the same slice as a.
type SoftmaxValueBackFunc func(t int, a, v, dy, db, dv []float32)

// SoftmaxRowsFunc is attention's softmax alone for one (sequence, head): the
// bf16 path's first pass, whose value products then run on the bf16
// kernels (runtime/mat) rather than fused with the softmax. It computes the
// rows i0 ≤ i < i1 (0 ≤ i0 ≤ i1 ≤ t) of a t-token block, a strip of it,
// row i of b and of a at (i−i0)·N (both slices start at the strip's first
// row):
//
//	a[r·N+j] = exp(b[r·N+j] − m_i) / Σ_{j'≤i} exp(b[r·N+j'] − m_i),  j ≤ i, r = i − i0, m_i = max_{j≤i} b[r·N+j]
//
// writing only j ≤ i of those rows (the bf16 packers take the rest of a
// product's triangle as zero themselves). i0 = 0, i1 = t is the whole
// block; a strip's rows are bit for bit those of the whole block's call. a
// may be the same slice as b. Entries of b may be −Inf (an extra mask); a
// row whose entries are all −Inf gives a = 0. Unmasked (a bidirectional
// spec) every row runs over j < t.
type SoftmaxRowsFunc func(t, i0, i1 int, b, a []float32)

// SoftmaxRowsBackFunc is the backward of SoftmaxRowsFunc: from the kept
// probabilities a and g = ∂loss/∂a it writes, for the rows i0 ≤ i < i1
// (0 ≤ i0 ≤ i1 ≤ t) of a t-token block and j ≤ i (overwrite), row i of
// each slice at (i−i0)·N,
//
//	db[r·N+j] = a[r·N+j] · (g[r·N+j] − Σ_{j'≤i} a[r·N+j'] · g[r·N+j']),  r = i − i0
//
// reading only j ≤ i of those rows of a and g and writing only j ≤ i of db
// (unmasked: j < t). i0 = 0, i1 = t is the whole block; a strip's rows
// are bit for bit those of the whole block's call. db may be the same
// slice as a or as g.
type SoftmaxRowsBackFunc func(t, i0, i1 int, a, g, db []float32)

// ProductFunc synthesizes logits as a causal product (vanilla's Q·Kᵀ,
// dense's G·W2ᵀ, factorized random's R1·R2ᵀ): for j ≤ i < t (overwrite)
//
//	c[i·N+j] = scale · Σ_{p<W} x[i·LX+p] · w[j·LW+p] + bias[j]
//
// with the width W and the row strides LX, LW fixed by the kernel's
// instance; bias may be empty (no bias).
type ProductFunc func(t int, x, w, bias, c []float32, scale float32)

// ProductBackXFunc is the gradient of ProductFunc with respect to x (overwrite):
//
//	dx[i·LX+p] = scale · Σ_{j≤i} dc[i·N+j] · w[j·LW+p]
type ProductBackXFunc func(t int, dc, w, dx []float32, scale float32)

// ProductBackWFunc is the gradient of ProductFunc with respect to w and the
// bias (accumulate):
//
//	dw[j·LW+p] += scale · Σ_{j≤i<t} dc[i·N+j] · x[i·LX+p]
//	dbias[j]   += Σ_{j≤i<t} dc[i·N+j]          (skipped when dbias is empty)
type ProductBackWFunc func(t int, dc, x, dw, dbias []float32, scale float32)

// TileFunc synthesizes factorized-dense logits (overwrite), j ≤ i < t:
//
//	c[i·N+j] = fa[i·LA + j/FB] · fb[i·LB + j%FB]
//
// with LA = Heads·FA and LB = Heads·FB the row strides of the per-sequence
// FA and FB matrices (pass the head's slice).
type TileFunc func(t int, fa, fb, c []float32)

// TileBackFunc is the gradient of TileFunc (overwrite), for i < t, p < FA, q < FB:
//
//	dfa[i·LA+p] = Σ_{j=p·FB+q ≤ i} dc[i·N+j] · fb[i·LB+q]
//	dfb[i·LB+q] = Σ_{j=p·FB+q ≤ i} dc[i·N+j] · fa[i·LA+p]
type TileBackFunc func(t int, dc, fa, fb, dfa, dfb []float32)

// TriScaleFunc writes y = alpha·x on the causal triangle (overwrite).
type TriScaleFunc func(t int, alpha float32, x, y []float32)

// TriAxpyFunc adds alpha·x to y on the causal triangle (accumulate).
type TriAxpyFunc func(t int, alpha float32, x, y []float32)

// TriDotFunc returns Σ_{j≤i<t} x[i·N+j]·y[i·N+j].
type TriDotFunc func(t int, x, y []float32) float32

// The attention-free kernels (aft_full, aft_local, aft_conv, aft_simple)
// compute, for one (sequence, head), the normalised weighted sum Z of the
// model card; the runtime applies the σ(Q) gate and the projections. For
// i < t and channel c < DH, with a bias b_ij that depends on the variant,
//
//	e_ij[c]   = k[j·D+c] + b_ij                                  j ≤ i
//	m[i·D+c]  = max_{j≤i} e_ij[c]
//	rd[i·D+c] = 1 / Σ_{j≤i} exp(e_ij[c] − m[i·D+c])
//	z[i·D+c]  = rd[i·D+c] · Σ_{j≤i} exp(e_ij[c] − m[i·D+c]) · v[j·D+c]
//
// k, v, z, m, rd and the gradients dz, dk, dv are head slices of [t, D]
// matrices (row stride D, width DH). All forward outputs are overwritten;
// m and rd are the per-row statistics the backward reads, so a training
// step keeps them beside z. Every exponential has an argument ≤ 0 and every
// denominator is ≥ 1, so any finite k and bias (±1e4 included) give finite,
// exact results.
//
// The backward kernels read the forward's inputs and outputs (k, v, the
// bias, z, m, rd) and the output gradient dz. With
//
//	p_ij[c] = exp(e_ij[c] − m[i·D+c]) · rd[i·D+c]
//	g_ij[c] = p_ij[c] · dz[i·D+c] · (v[j·D+c] − z[i·D+c])
//
// they overwrite
//
//	dv[j·D+c] = Σ_{j≤i<t} p_ij[c] · dz[i·D+c]
//	dk[j·D+c] = Σ_{j≤i<t} g_ij[c]
//
// and ADD Σ_{c<DH} g_ij[c] to the gradient of each learned bias entry b_ij
// uses (the parameter gradients accumulate: the runtime gives each task its
// own buffer and reduces them in a fixed order).
//
// Unmasked (a bidirectional spec, "causal": false) the same formulas hold
// with every j ≤ i and j ≤ i < t read as j < t and i < t: w's whole [t, t]
// block is read (and dw's accumulated), aft_local's band is |i − j| < S,
// aft_conv's u is head h's row of the [Heads, 2S − 1] parameter (pass
// u[h·(2S−1):]) with b_ij = u[i − j + S − 1] for |i − j| < S, 0 otherwise,
// and aft_simple's statistics are the same for every row. Linear attention
// uses S = Σ_{j<t} fk_j v_jᵀ and z = Σ_{j<t} fk_j for every row i.

// AFTFullFunc is the aft_full forward: b_ij = w[i·N+j], with w the [N, N]
// bias parameter (row stride N; only j ≤ i < t is read).
type AFTFullFunc func(t int, k, v, w, z, m, rd []float32)

// AFTFullBackFunc is the backward of AFTFullFunc; it overwrites dk and dv
// and accumulates dw[i·N+j] += Σ_c g_ij[c] for j ≤ i < t.
type AFTFullBackFunc func(t int, k, v, w, z, m, rd, dz, dk, dv, dw []float32)

// AFTLocalFunc is the aft_local forward with the spec's window S:
// b_ij = w[i·N+j] for i − j < S and b_ij = 0 (not −∞) for i − j ≥ S, so the
// keys outside the window still count with weight exp(k_j). Only the band
// i − S < j ≤ i < t of w is read.
type AFTLocalFunc func(t int, k, v, w, z, m, rd []float32)

// AFTLocalBackFunc is the backward of AFTLocalFunc; it overwrites dk and dv
// and accumulates dw[i·N+j] += Σ_c g_ij[c] on the band i − S < j ≤ i < t
// only (the other entries of w are unused and dw there is left untouched).
type AFTLocalBackFunc func(t int, k, v, w, z, m, rd, dz, dk, dv, dw []float32)

// AFTConvFunc is the aft_conv forward with the spec's window S:
// b_ij = u[i−j] for i − j < S and 0 otherwise, where u is head h's row of
// the [Heads, S] parameter (pass u[h·S:]).
type AFTConvFunc func(t int, k, v, u, z, m, rd []float32)

// AFTConvBackFunc is the backward of AFTConvFunc; it overwrites dk and dv
// and accumulates du[l] += Σ_{j, i−j=l} Σ_c g_ij[c] for l < S.
type AFTConvBackFunc func(t int, k, v, u, z, m, rd, dz, dk, dv, du []float32)

// AFTSimpleFunc is the aft_simple forward: b_ij = 0, so m[i·D+c] is the
// running maximum of k over j ≤ i.
type AFTSimpleFunc func(t int, k, v, z, m, rd []float32)

// AFTSimpleBackFunc is the backward of AFTSimpleFunc (overwrites dk, dv).
type AFTSimpleBackFunc func(t int, k, v, z, m, rd, dz, dk, dv []float32)

// LinearFunc is causal linear attention for one (sequence, head), given the
// feature maps fq = φ(Q_h) and fk = φ(K_h) (φ = elu + 1, so both positive;
// the runtime applies φ and the projections): for i < t (overwrite),
//
//	S_i = Σ_{j≤i} fk_j v_jᵀ  (DH×DH),  z_i = Σ_{j≤i} fk_j
//	rd[i·Heads] = 1 / (fq_i · z_i + 1e-6)
//	y[i·D+c]    = rd[i·Heads] · Σ_{p<DH} fq[i·D+p] · S_i[p, c]
//
// with x_i the row x[i·D : i·D+DH]. fq, fk, v and y are head slices of
// [t, D] matrices; rd is column h of a [t, Heads] matrix (pass rd[h:]), the
// statistic the backward reads. No [t, t] matrix is formed.
type LinearFunc func(t int, fq, fk, v, y, rd []float32)

// LinearBackFunc is the backward of LinearFunc. From the forward's inputs,
// its outputs y and rd, and the output gradient dy it overwrites, with
// a_i = rd_i·dy_i and b_i = −rd_i·(dy_i · y_i),
//
//	dfq[i·D+p] = Σ_c S_i[p, c]·a_i[c] + b_i·z_i[p]
//	dfk[j·D+p] = Σ_{j≤i<t} (a_i · v_j + b_i) · fq[i·D+p]
//	dv[j·D+c]  = Σ_{j≤i<t} (fq_i · fk_j) · a_i[c]
//
// in a forward sweep (dfq) and reverse sweeps (dfk, dv) with running
// DH×DH sums; no [t, t] matrix is formed.
type LinearBackFunc func(t int, fq, fk, v, y, rd, dy, dfq, dfk, dv []float32)

// The row-wise kernels (LayerNorm and the feed-forward's GELU) work on t
// rows of a row-major matrix that may hold several sequences, so t is any
// count ≥ 0, not a length ≤ N; each row is D floats (LayerNorm) or FFN
// floats (GELU), both baked in, at stride D (FFN). Sums are formed in
// float32 in an order fixed by D alone, so every output depends only on
// the inputs it is a function of (never on how a caller splits the rows
// into calls, except LayerNormGradFunc's, which depend on its t rows). The
// levels may round differently from one another. Outputs must not overlap
// inputs other than as stated.

// LayerNormFunc is the LayerNorm forward (overwrite): for every row r < t,
// with x_r = x[r·D : r·D+D],
//
//	mu[r]    = Σ_c x_r[c] / D
//	rs[r]    = 1 / √(Σ_c (x_r[c] − mu[r])² / D + 1e-5)
//	y[r·D+c] = (x_r[c] − mu[r]) · rs[r] · gamma[c] + beta[c],   c < D
//
// gamma and beta hold D floats. The statistics take two passes over the
// row: a first mean m0, then the centred sums of d = x − m0, which give the
// correction dm = Σd/D and the variance Σd²/D − dm² (clamped at 0; not
// E[x²] − E[x]²). mu[r] is m0 + dm rounded to float32, while y is formed
// from x − m0 − dm, so a large common offset costs neither y nor rs any
// precision. A constant row gives rs = 1/√1e-5 and y = beta.
type LayerNormFunc func(t int, x, gamma, beta, y, mu, rs []float32)

// LayerNormBackFunc is the LayerNorm backward to its input (accumulate),
// from the statistics mu and rs the forward wrote: for every row r < t,
// with x̂[c] = (x[r·D+c] − mu[r])·rs[r] and g[c] = dy[r·D+c]·gamma[c],
//
//	dx[r·D+c] += rs[r] · (g[c] − Σ_c' g[c']/D − x̂[c] · Σ_c' g[c']·x̂[c']/D),   c < D
//
// (to overwrite, clear dx first).
type LayerNormBackFunc func(t int, dy, x, mu, rs, gamma, dx []float32)

// LayerNormGradFunc accumulates the LayerNorm's parameter gradients over
// t rows: for c < D,
//
//	dgamma[c] += Σ_{r<t} dy[r·D+c] · (x[r·D+c] − mu[r]) · rs[r]
//	dbeta[c]  += Σ_{r<t} dy[r·D+c]
//
// Each column's sum is formed in one float32 accumulator starting from 0,
// over r in increasing order, and then added to dgamma[c] (dbeta[c]) once,
// so the result depends only on the inputs: a caller that makes one call
// over all rows gets the same bits whatever its worker count.
type LayerNormGradFunc func(t int, dy, x, mu, rs, dgamma, dbeta []float32)

// GeluFunc is the feed-forward's GELU (tanh form) on t rows of FFN floats,
// i.e. the t·FFN consecutive floats of u: for i < t·FFN, with x = u[i] and
// z = √(2/π)·(x + 0.044715·x³),
//
//	g[i] = 0.5·x·(1 + tanh z)                                              (overwrite)
//	u[i] = 0.5·(1 + tanh z) + 0.5·x·(1 − tanh² z)·√(2/π)·(1 + 3·0.044715·x²)   (gelu'(x), in place)
//
// so the forward's u becomes what the backward needs (GeluBackFunc). tanh
// is Eigen's rational approximation (a 13/6-degree odd/even ratio, |z|
// clamped to 7.90531110763549805, absolute error below 4e-7), which is ±1
// exactly beyond the clamp: there g = x or ±0 and gelu' = 1 or 0. Every
// level performs the same float32 operations (no fused multiply-adds), so
// the levels agree bit for bit.
type GeluFunc func(t int, u, g []float32)

// GeluBackFunc is the GELU backward on t rows of FFN floats: for
// i < t·FFN, a[i] ← a[i]·b[i] (a the output gradient, b the derivative
// GeluFunc left in u).
type GeluBackFunc func(t int, a, b []float32)

// SoftmaxStatsFunc is the cross-entropy's forward on t rows of Vocab logits
// (stride Vocab): for every row r < t (overwrite),
//
//	mx[r] = max_c x[r·Vocab+c],   s[r] = Σ_c exp(x[r·Vocab+c] − mx[r])
//
// so that log Σ_c exp(x) = mx[r] + log s[r] (the caller takes the log, once
// per row, in float64). 1 ≤ s[r] ≤ Vocab for finite rows; a row holding a
// NaN gives a NaN mx[r] or s[r]. The levels may round differently.
type SoftmaxStatsFunc func(t int, x, mx, s []float32)

// SoftmaxScaleFunc is the cross-entropy's backward on t rows of Vocab
// logits: for every row r < t and c < Vocab (overwrite),
//
//	y[r·Vocab+c] = exp(min(x[r·Vocab+c] − lse[r], 0)) · scale
//
// with lse[r] the row's log Σ exp (so y is the softmax times scale; the
// clamp keeps a lse rounded below the row's max from giving more than
// scale). y may not overlap x.
type SoftmaxScaleFunc func(t int, x, lse, y []float32, scale float32)

// AdamWFunc is the optimizer's update of t parameters p with gradients g
// and moments m, v (all t floats; p, m and v updated in place), in
// float32: for i < t, with g' = g[i]·gscale,
//
//	m[i] = b1·m[i] + c1·g'
//	v[i] = b2·v[i] + c2·g'²
//	p[i] = p[i]·decay − step·m[i] / (√v[i]·rbc2 + eps)
//
// (AdamW with c1 = 1 − β1, c2 = 1 − β2, step = lr/(1 − β1^k), rbc2 =
// 1/√(1 − β2^k), decay = 1 − lr·wd, gscale the clipping factor). Elements
// are independent, so any split of a parameter into calls gives the same
// bits. The levels may round differently (the assembly fuses
// multiply-adds).
type AdamWFunc func(t int, p, g, m, v []float32, decay, gscale, b1, c1, b2, c2, eps, step, rbc2 float32)

// ExpFunc replaces each of the t floats of x by its exponential,
// x[i] = e^min(x[i], 88), with a relative error of a few ulp; results below
// the smallest normal float32 (x below about −87.3) may be flushed to +0,
// and e^−Inf is +0. Elements are independent, so any split into calls
// gives the same bits at one level; the levels may round differently. The
// factorised aft_full takes its exponentials with it.
type ExpFunc func(t int, x []float32)

// GateFunc is the aft variants' σ(Q) gate over t consecutive floats:
// q[i] = σ(q[i]) = 1/(1 + e^min(−q[i], 88)), then y[i] = q[i]·z[i] with
// the new q[i]; a few ulp from the exact values (a σ below the smallest
// normal float32 may be flushed to +0). Elements are independent, so any
// split into calls gives the same bits at one level; the levels may round
// differently.
type GateFunc func(t int, q, z, y []float32)

// GateBackFunc is the gate's backward over t consecutive floats, with q
// holding σ(Q) and dy the gradient of Y: dq[i] = ((dy[i]·z[i])·q[i])·(1 −
// q[i]), then dy[i] = dy[i]·q[i] (the gradient of Z, in place), each
// product rounded to float32 in that order, so every level gives the same
// bits.
type GateBackFunc func(t int, dy, q, z, dq []float32)

// AFTFactorsFunc is the factorised aft_full's key factors over t
// consecutive floats (a row of one sequence's channels): ek[i] =
// e^min(k[i] − kappa[i], 88), with ExpFunc's accuracy, then kv[i] =
// ek[i]·v[i].
type AFTFactorsFunc func(t int, k, kappa, v, kv, ek []float32)

// AFTMaxFunc is the factorised aft_full's running key maximum over t
// consecutive floats (a row of one sequence's channels): kappa[i] = k[i]
// unless kappa[i] > k[i], the comparison of MAXPS (a NaN k[i] is taken, a
// NaN kappa[i] gives way to the next k[i]), so every level gives the same
// bits.
type AFTMaxFunc func(t int, k, kappa []float32)

// AFTQuotFunc is the factorised aft_full's quotient over t consecutive
// floats: z[i] = num[i]/den[i], one correctly rounded float32 division, so
// every level gives the same bits. A den[i] of 0 gives an infinity or a
// NaN; the caller computes such elements otherwise.
type AFTQuotFunc func(t int, num, den, z []float32)

// AFTQuotBackFunc is the backward of the factorised aft_full's quotient
// z = num/den over t consecutive floats: with r = 1/den[i] rounded to
// float32, dnum[i] = dz[i]·r and dden[i] = −(dz[i]·z[i])·r, each rounded in
// that order, so every level gives the same bits. A den of 0 gives
// infinities; the caller computes such elements otherwise.
type AFTQuotBackFunc func(t int, dz, z, den, dnum, dden []float32)

// AFTKVBackFunc is the factorised aft_full's key-and-value gradient over t
// consecutive floats, from G = [g1 | g2]: dv[i] = ek[i]·g1[i] and dk[i] =
// ek[i]·(v[i]·g1[i] + g2[i]), each operation rounded to float32 in that
// order (no fused multiply-add), so every level gives the same bits.
type AFTKVBackFunc func(t int, ek, v, g1, g2, dk, dv []float32)

// GemmTileFunc is the register-blocked micro-kernel of the linear layers'
// matrix products (runtime/mat): with MR×NR the level's tile shape (its
// GemmShapeFunc), for i < mr and j < nr ≤ NR it computes
//
//	s = Σ_{p<kc} a[i·ai + p·ap] · b[p·bp + j]  (+ bias[j] when bias is not empty)
//	c[i·ldc+j] = s  when overwrite,  c[i·ldc+j] += s  otherwise
//
// A is read through two strides, so a packed panel (ai 1, ap MR), a
// row-major matrix (ai = its row stride, ap 1) and a column-major one
// (ai 1, ap = its column stride) are all read in place; B's row p is NR
// contiguous floats at b[p·bp:]. The kernel reads the whole MR×kc block of
// A and kc×NR block of B (the caller pads edge tiles; those entries may
// hold anything finite), the first nr floats of bias, and only the mr×nr
// corner of c (ldc ≥ nr), which it does not read when overwriting. Each
// sum is formed in one accumulator starting from 0, over p in increasing
// order, then the bias is added, then the result is stored or added to c,
// so a result depends only on its own inputs and kc. c must not overlap a,
// b or bias. mr = 0 or nr = 0 leaves c unchanged; kc = 0 stores (or adds)
// the bias alone.
//
// mr may exceed MR: the kernel then runs ⌈mr/MR⌉ tiles down the rows in
// one call (so that the call and its checks are paid once, not per
// tile), tile r on A's block at a[r·at:] (at = MR·ai for a matrix read in
// place, MR·kc for packed panels one after another) and c's rows from
// c[r·MR·ldc:], each as above; A must hold MR whole rows for each tile
// (the last tile's rows past mr may hold anything finite). With mr ≤ MR,
// at is not used.
//
// When asum is not empty (which needs ai = 1), the kernel also adds A's
// row sums, asum[i] += Σ_{p<kc} a[i + p·ap] for i < mr, each formed in one
// accumulator from 0 over p in increasing order: the bias gradient of a
// backward product, whose A is the transposed output gradient, for free.
//
// When apack is not empty (which needs ai = 1) the kernel also copies the
// block of A it reads into it as a packed panel, apack[p·MR + i] =
// a[i + p·ap] for i < MR, p < kc (tile r's at apack[r·MR·kc:]); when bpack
// is not empty, it copies B's, bpack[p·NR + j] = b[p·bp + j] for j < NR,
// p < kc, and the tiles after the first read the copy. The caller then runs
// the tile's neighbours on the copies (ai 1, ap MR; bp NR), which fill
// consecutive cache lines where the operand in place puts each p on a
// line of its own, often in the same few cache sets: packing on the way
// through costs a store per vector loaded rather than a pass of its own.
// apack and bpack must not overlap the other slices.
type GemmTileFunc func(kc int, a []float32, ai, ap, at int, b []float32, bp int, c []float32, ldc, mr, nr int, bias, asum, apack, bpack []float32, overwrite bool)

// GemvFunc is a linear layer on t rows, the decoder's one-row products
// (K→N: D→D, D→FFN, FFN→D, D→Vocab, baked in): for every row r < t and
// column j < N,
//
//	y[r·N+j] = Σ_{p<K} x[r·K+p] · W(j, p)  (+ bias[j] when bias is not empty)
//
// with x [t, K] and y [t, N] row-major and W (N × K, the model's weight)
// packed as column blocks of GemvCols: block b holds columns j0 = b·GemvCols
// … j0+w−1, w = min(GemvCols, N − j0), as Wᵀ's [K, w] row-major part,
// w[b·GemvCols·K + p·w + (j − j0)] = W(j, p), the blocks one after another
// (K·N floats; GemvPack builds it). Each block is then one contiguous stream
// read once per row of x. The sum follows the GEMM micro-kernel's order
// (runtime/mat's products): over blocks of GemvKC inner indices, each
// block's sum formed in one accumulator from 0 over p in increasing order
// with fused multiply-adds, the blocks' sums added in increasing order,
// then the bias added; so a row's result is bit for bit the micro-kernel
// product's plus the bias (the Go level, without fused multiply-adds, may
// round differently). y must not overlap x, w or bias.
type GemvFunc func(t int, x, w, bias, y []float32)

// AttendFunc is the decoder's attention row over t cached positions
// (t ≥ 1, a run-time length ≤ N; t = 0 does nothing): a stable softmax of
// the logits b[:t] and the weighted sum of t rows of v, W floats wide and
// W apart (W baked in: DH for a head's cached values, 2D for aft_full's
// cached factors). With m = max_j b[j] and e_j = e^(b[j] − m) (e^−∞ = 0),
//
//	b[j] = e_j                          (j < t; b is overwritten)
//	y[c] = (Σ_{j<t} e_j · v[j·W+c]) / s  (c < W),  s = Σ_{j<t} e_j
//
// and it returns s (≥ 1 for finite logits). The sums' order is the
// level's: levels agree to rounding, not bit for bit. y must not overlap b
// or v.
type AttendFunc func(t int, b, v, y []float32) float32

// ScoresFunc is vanilla's logits of one query against t cached keys (t ≥ 1,
// a run-time length ≤ N), the keys a head's [t, DH] rows (as AttendFunc
// reads the values):
//
//	b[j] = scale · Σ_{p<DH} q[p] · k[j·DH+p]  (j < t)
//
// DH baked in. The sums' order is the level's. b must not overlap q or k.
type ScoresFunc func(t int, q, k, b []float32, scale float32)

// GemvCols is the width of GemvFunc's column blocks; GemvKC its block of the
// inner dimension, runtime/mat's kcBlock (the decoder's exactness tests
// compare the two paths bit for bit).
const (
	GemvCols = 64
	GemvKC   = 256
)

// GemvPack packs w (n × k, row-major, the layout of the model's linear
// weights) into dst (n·k floats) as GemvFunc reads it.
func GemvPack(dst, w []float32, n, k int) {
	// Transposed tile by tile (gemvPackTile inner indices at a time): a
	// tile's rows of dst stay in cache while the block's columns fill them.
	for j0 := 0; j0 < n; j0 += GemvCols {
		cols := min(GemvCols, n-j0)
		blk := dst[j0*k : j0*k+cols*k]
		for p0 := 0; p0 < k; p0 += gemvPackTile {
			pn := min(gemvPackTile, k-p0)
			for j := 0; j < cols; j++ {
				row := w[(j0+j)*k+p0 : (j0+j)*k+p0+pn]
				for p, v := range row {
					blk[(p0+p)*cols+j] = v
				}
			}
		}
	}
}

// gemvPackTile is the inner indices GemvPack transposes at a time.
const gemvPackTile = 16

// GemmShapeFunc returns the tile shape MR×NR of the GemmTileFunc of the same
// level.
type GemmShapeFunc func() (mr, nr int)

// Set holds one instruction set's kernels for one spec. A nil field is a
// kernel the spec does not need (or this level does not provide).
type Set struct {
	ISA ISA

	SoftmaxValue     SoftmaxValueFunc
	SoftmaxValueBack SoftmaxValueBackFunc

	// The softmax alone and its backward (the bf16 path's attention).
	SoftmaxRows     SoftmaxRowsFunc
	SoftmaxRowsBack SoftmaxRowsBackFunc

	// vanilla: x = Q_h, w = K_h (strides D, width DH).
	VanillaLogits      ProductFunc
	VanillaLogitsBackX ProductBackXFunc
	VanillaLogitsBackW ProductBackWFunc

	// dense: x = relu(w1(h))_h (stride D, width DH), w = w2.weight (stride DH).
	DenseLogits      ProductFunc
	DenseLogitsBackX ProductBackXFunc
	DenseLogitsBackW ProductBackWFunc

	// factorized_random: x = R1[h], w = R2[h] (stride K, width K).
	FactRandomLogits      ProductFunc
	FactRandomLogitsBackX ProductBackXFunc
	FactRandomLogitsBackW ProductBackWFunc

	// factorized_dense: the tiling product of FA and FB.
	FactDenseLogits     TileFunc
	FactDenseLogitsBack TileBackFunc

	// Mixtures and random's gradient: causal-triangle vector operations.
	TriScale TriScaleFunc
	TriAxpy  TriAxpyFunc
	TriDot   TriDotFunc

	// Attention-free variants and linear attention: one (sequence, head)
	// per call.
	AFTFull       AFTFullFunc
	AFTFullBack   AFTFullBackFunc
	AFTLocal      AFTLocalFunc
	AFTLocalBack  AFTLocalBackFunc
	AFTConv       AFTConvFunc
	AFTConvBack   AFTConvBackFunc
	AFTSimple     AFTSimpleFunc
	AFTSimpleBack AFTSimpleBackFunc
	Linear        LinearFunc
	LinearBack    LinearBackFunc

	// Every spec's row-wise passes: LayerNorm over [t, D] rows and the
	// feed-forward's GELU over [t, FFN] rows.
	LayerNorm     LayerNormFunc
	LayerNormBack LayerNormBackFunc
	LayerNormGrad LayerNormGradFunc
	Gelu          GeluFunc
	GeluBack      GeluBackFunc
	SoftmaxStats  SoftmaxStatsFunc
	SoftmaxScale  SoftmaxScaleFunc
	AdamW         AdamWFunc

	// aft_full's exponentials (a row-wise kernel of its spec only).
	Exp ExpFunc
	// The factorised aft_full's element-wise passes (its specs only).
	AFTMax      AFTMaxFunc
	AFTFactors  AFTFactorsFunc
	AFTQuot     AFTQuotFunc
	AFTQuotBack AFTQuotBackFunc
	AFTKVBack   AFTKVBackFunc
	// Every aft variant's σ(Q) gate, forward and backward.
	Gate     GateFunc
	GateBack GateBackFunc

	// The decoder's one-row linear layers (GemvFunc), in every spec: D→D,
	// D→FFN, FFN→D and D→Vocab (the tied output projection).
	GemvDD GemvFunc
	GemvDF GemvFunc
	GemvFD GemvFunc
	GemvDV GemvFunc

	// The decoder's attention row (AttendFunc, ScoresFunc): AttendDH on a
	// head's cached values (the Synthesizer family), AttendKV on aft_full's
	// cached factors [exp(K−κ)⊙V | exp(K−κ)] (2D wide), VanillaScores on
	// vanilla's cached keys.
	AttendDH      AttendFunc
	AttendKV      AttendFunc
	VanillaScores ScoresFunc

	// The linear layers' GEMM micro-kernel, in every spec. GemmTile and
	// GemmShape are always provided together, at the same levels, so
	// dispatch picks both from one level.
	GemmTile  GemmTileFunc
	GemmShape GemmShapeFunc
}
