package gogen

// Emitters of the unmasked (bidirectional, catalog.Config.Bidirectional)
// attention-free and linear kernels: every row i sees every key j < t.
// The algorithms:
//
//   - AFT forward: the keys outside the window (bias 0, |i − j| ≥ S) are a
//     prefix scan (j ≤ i − S) and a suffix scan (j ≥ i + S). A reverse
//     sweep first keeps the suffix scan and parks it, row by row, in the
//     outputs (its maximum in m, Σ exp(k − r)·v in z, Σ exp(k − r) in rd);
//     the forward sweep keeps the prefix scan, reads the parked suffix,
//     sums the window's keys directly after a pass for their maximum and
//     overwrites the row. aft_full has no scans (every key in the window),
//     aft_simple no window: one scan over all keys gives every row the
//     same result.
//   - AFT backward: the rows that see key j with bias 0 are kept as suffix
//     sums shifted by their smallest statistic (as in the causal kernels),
//     once over the rows i ≤ j − S in a forward sweep, which writes dk and
//     dv, and once over the rows i ≥ j + S in a reverse sweep, which adds
//     them and the window's rows (|i − j| < S) summed directly.
//   - Linear: S = Σ_j fk_j v_jᵀ and z = Σ_j fk_j are global; the backward
//     builds S for dfq, then G = Σ_i fq_i a_iᵀ and h = Σ_i b_i fq_i for dfk
//     and dv.

import (
	"fmt"

	"github.com/dave/jennifer/jen"

	"github.com/synthgen/synthgen/gen/catalog"
)

// biBiasDoc describes b_ij of a bidirectional kernel.
func biBiasDoc(m catalog.AFTBias) string {
	switch m {
	case catalog.BiasFull:
		return "b_ij = w[i·N+j]"
	case catalog.BiasLocal:
		return "b_ij = w[i·N+j] for |i − j| < S, 0 for |i − j| ≥ S"
	case catalog.BiasConv:
		return "b_ij = u[i−j+S−1] for |i − j| < S, 0 for |i − j| ≥ S"
	}
	return "b_ij = 0"
}

// biBias declares b, the bias of key j in row i (inside the window).
func biBias(m catalog.AFTBias) jen.Code {
	if m == catalog.BiasConv {
		return jen.Id("b").Op(":=").Id("uw").Index(jen.Id("i").Op("-").Id("j").Op("+").Id("S").Op("-").Lit(1))
	}
	return jen.Id("b").Op(":=").Id("w").Index(jen.Id("i").Op("*").Id("N").Op("+").Id("j"))
}

// biWindow returns the window's key (or row) range [lo, hi) around x.
func biWindow(m catalog.AFTBias, x string) (lo, hi jen.Code) {
	if m == catalog.BiasFull {
		return jen.Lit(0), jen.Id("t")
	}
	return jen.Max(jen.Id(x).Op("-").Id("S").Op("+").Lit(1), jen.Lit(0)), jen.Min(jen.Id(x).Op("+").Id("S"), jen.Id("t"))
}

// biScanVars declares the scan state r, sa, sb with r = −∞.
func biScanVars() []jen.Code {
	return []jen.Code{
		jen.Var().List(aftID("r"), aftID("sa"), aftID("sb")).Index(aftID("DH")).Float32(),
		jen.For(jen.Id("c").Op(":=").Range().Id("r")).Block(aftAtC("r").Op("=").Add(aftInf(-1))),
	}
}

// biAddKey adds key j to the scan (r, sa, sb) if 0 ≤ j < t.
func biAddKey(j jen.Code) jen.Code {
	return jen.If(jen.Id("j").Op(":=").Add(j), jen.Id("j").Op(">=").Lit(0).Op("&&").Id("j").Op("<").Id("t")).Block(
		aftHeadRow("kr", "k", "j"),
		aftHeadRow("vr", "v", "j"),
		aftForC(aftScanAdd()...),
	)
}

// emitAFTBi emits the unmasked forward of an AFT kernel.
func emitAFTBi(f *jen.File, op catalog.Op, cfg catalog.Config) {
	m := catalog.Of(op.Kind).Bias
	doc := fmt.Sprintf(`%s is the unmasked %s forward (kernels.%sFunc) for N = %d, D = %d, DH = %d%s:
for i < t and c < DH, with %s and e_ij[c] = k[j·D+c] + b_ij,

	m[i·D+c]  = max_{j<t} e_ij[c]
	rd[i·D+c] = 1 / Σ_{j<t} exp(e_ij[c] − m[i·D+c])
	z[i·D+c]  = rd[i·D+c] · Σ_{j<t} exp(e_ij[c] − m[i·D+c]) · v[j·D+c]

(overwrite).%s`, Name(op), op.Kind, op.Kind, cfg.N, cfg.D, cfg.DH, aftWindowDoc(op, m), biBiasDoc(m), biFwdAlgoDoc(m))

	body := []jen.Code{aftSizes(op, cfg, m)}
	if m == catalog.BiasConv {
		body = append(body, jen.Id("uw").Op(":=").Id("u").Index(jen.Empty(), jen.Lit(2).Op("*").Id("S").Op("-").Lit(1), jen.Lit(2).Op("*").Id("S").Op("-").Lit(1)))
	}
	switch {
	case m == catalog.BiasSimple:
		body = append(body, jen.Comment("One scan over all the keys; every row gets its result."))
		body = append(body, biScanVars()...)
		body = append(body,
			jen.For(jen.Id("j").Op(":=").Lit(0), jen.Id("j").Op("<").Id("t"), jen.Id("j").Op("++")).Block(
				aftHeadRow("kr", "k", "j"),
				aftHeadRow("vr", "v", "j"),
				aftForC(aftScanAdd()...),
			),
			forRows(
				aftHeadRow("zr", "z", "i"), aftHeadRow("mr", "m", "i"), aftHeadRow("rdr", "rd", "i"),
				aftForC(
					jen.Id("inv").Op(":=").Lit(1).Op("/").Add(aftAtC("sb")),
					aftAtC("zr").Op("=").Add(aftAtC("sa")).Op("*").Id("inv"),
					aftAtC("mr").Op("=").Add(aftAtC("r")),
					aftAtC("rdr").Op("=").Id("inv"),
				),
			))
		funcDecl(f, op, doc, body...)
		return
	case m.Scan():
		body = append(body, jen.Comment("Reverse sweep: the suffix scan over the keys j ≥ i + S, parked in row i"),
			jen.Comment("of the outputs (r in m, sa in z, sb in rd)."))
		body = append(body, biScanVars()...)
		body = append(body,
			jen.For(jen.Id("i").Op(":=").Id("t").Op("-").Lit(1), jen.Id("i").Op(">=").Lit(0), jen.Id("i").Op("--")).Block(
				biAddKey(jen.Id("i").Op("+").Id("S")),
				aftHeadRow("zr", "z", "i"), aftHeadRow("mr", "m", "i"), aftHeadRow("rdr", "rd", "i"),
				aftForC(
					aftAtC("mr").Op("=").Add(aftAtC("r")),
					aftAtC("zr").Op("=").Add(aftAtC("sa")),
					aftAtC("rdr").Op("=").Add(aftAtC("sb")),
				),
			),
			jen.Comment("Forward sweep: the prefix scan over the keys j ≤ i − S."),
		)
		body = append(body,
			jen.For(jen.Id("c").Op(":=").Range().Id("r")).Block(aftAtC("r").Op("=").Add(aftInf(-1))),
			jen.Id("sa").Op("=").Index(aftID("DH")).Float32().Values(),
			jen.Id("sb").Op("=").Index(aftID("DH")).Float32().Values(),
		)
	}
	body = append(body, jen.Var().List(aftID("mx"), aftID("num"), aftID("den")).Index(aftID("DH")).Float32())

	lo, hi := biWindow(m, "i")
	var row []jen.Code
	if m.Scan() {
		row = append(row, jen.Comment("Add key i − S, which leaves the window at row i."), biAddKey(jen.Id("i").Op("-").Id("S")))
	}
	row = append(row, aftHeadRow("zr", "z", "i"), aftHeadRow("mr", "m", "i"), aftHeadRow("rdr", "rd", "i"),
		jen.Id("j0").Op(",").Id("j1").Op(":=").List(lo, hi),
		jen.Comment("The row maximum: of the scans and of the keys in the window."))
	if m.Scan() {
		row = append(row, aftForC(aftAtC("mx").Op("=").Max(aftAtC("r"), aftAtC("mr"))))
	} else {
		row = append(row, aftForC(aftAtC("mx").Op("=").Add(aftInf(-1))))
	}
	row = append(row,
		jen.For(jen.Id("j").Op(":=").Id("j0"), jen.Id("j").Op("<").Id("j1"), jen.Id("j").Op("++")).Block(
			biBias(m),
			aftHeadRow("kr", "k", "j"),
			aftForC(aftAtC("mx").Op("=").Max(aftAtC("mx"), aftAtC("kr").Op("+").Id("b"))),
		))
	if m.Scan() {
		row = append(row, aftForC(
			jen.Id("e").Op(":=").Add(aftExp(aftAtC("r").Op("-").Add(aftAtC("mx")))),
			jen.Id("es").Op(":=").Add(aftExp(aftAtC("mr").Op("-").Add(aftAtC("mx")))),
			aftAtC("num").Op("=").Add(aftAtC("sa")).Op("*").Id("e").Op("+").Add(aftAtC("zr")).Op("*").Id("es"),
			aftAtC("den").Op("=").Add(aftAtC("sb")).Op("*").Id("e").Op("+").Add(aftAtC("rdr")).Op("*").Id("es"),
		))
	} else {
		row = append(row,
			jen.Id("num").Op("=").Index(aftID("DH")).Float32().Values(),
			jen.Id("den").Op("=").Index(aftID("DH")).Float32().Values(),
		)
	}
	row = append(row,
		jen.For(jen.Id("j").Op(":=").Id("j0"), jen.Id("j").Op("<").Id("j1"), jen.Id("j").Op("++")).Block(
			biBias(m),
			aftHeadRow("kr", "k", "j"),
			aftHeadRow("vr", "v", "j"),
			aftForC(
				jen.Id("e").Op(":=").Add(aftExp(aftAtC("kr").Op("+").Id("b").Op("-").Add(aftAtC("mx")))),
				aftAtC("num").Op("+=").Id("e").Op("*").Add(aftAtC("vr")),
				aftAtC("den").Op("+=").Id("e"),
			),
		),
		aftForC(
			jen.Id("inv").Op(":=").Lit(1).Op("/").Add(aftAtC("den")),
			aftAtC("zr").Op("=").Add(aftAtC("num")).Op("*").Id("inv"),
			aftAtC("mr").Op("=").Add(aftAtC("mx")),
			aftAtC("rdr").Op("=").Id("inv"),
		),
	)
	body = append(body, forRows(row...))
	funcDecl(f, op, doc, body...)
}

func biFwdAlgoDoc(m catalog.AFTBias) string {
	switch m {
	case catalog.BiasFull:
		return " Per row, a first pass over the keys finds m, a second sums the\nexponentials."
	case catalog.BiasSimple:
		return " One scan over all the keys keeps the running maximum and the sums\nshifted by it; every row gets its result."
	}
	return ` The keys outside the window (bias 0) are a suffix scan (j ≥ i + S),
kept in a reverse sweep and parked in the row's outputs, and a prefix scan
(j ≤ i − S) kept in the forward sweep; the keys of the window are summed
directly after a pass for their maximum. All the parts are positive sums
shifted by m, so nothing cancels.`
}

// biRowScanAdd adds row i (m, rd, dz, z) to the backward's row scan
// (mu, r1, r2) of channel c.
func biRowScanAdd() []jen.Code {
	return []jen.Code{
		aftHeadRow("mr", "m", "i"),
		aftHeadRow("rdr", "rd", "i"),
		aftHeadRow("dzr", "dz", "i"),
		aftHeadRow("zr", "z", "i"),
		aftForC(
			jen.Id("bz").Op(":=").Add(aftAtC("rdr")).Op("*").Add(aftAtC("dzr")),
			jen.If(jen.Id("x").Op(":=").Add(aftAtC("mr")), jen.Id("x").Op("<").Add(aftAtC("mu"))).Block(
				jen.Id("e").Op(":=").Add(aftExp(jen.Id("x").Op("-").Add(aftAtC("mu")))),
				aftAtC("r1").Op("=").Add(aftAtC("r1")).Op("*").Id("e").Op("+").Id("bz"),
				aftAtC("r2").Op("=").Add(aftAtC("r2")).Op("*").Id("e").Op("+").Id("bz").Op("*").Add(aftAtC("zr")),
				aftAtC("mu").Op("=").Id("x"),
			).Else().Block(
				jen.Id("e").Op(":=").Add(aftExp(aftAtC("mu").Op("-").Id("x"))),
				aftAtC("r1").Op("+=").Id("e").Op("*").Id("bz"),
				aftAtC("r2").Op("+=").Id("e").Op("*").Id("bz").Op("*").Add(aftAtC("zr")),
			),
		),
	}
}

// biRowScanReset sets the row scan to empty: mu = +∞, r1 = r2 = 0.
func biRowScanReset() []jen.Code {
	return []jen.Code{
		jen.For(jen.Id("c").Op(":=").Range().Id("mu")).Block(aftAtC("mu").Op("=").Add(aftInf(1))),
		jen.Id("r1").Op("=").Index(aftID("DH")).Float32().Values(),
		jen.Id("r2").Op("=").Index(aftID("DH")).Float32().Values(),
	}
}

// biScanGrad sets (op "=") or adds (op "+=") key j's gradients from the
// row scan: exp(k_j − mu) ≤ 1 times the sums.
func biScanGrad(op string) jen.Code {
	return aftForC(
		jen.Id("e").Op(":=").Add(aftExp(aftAtC("kr").Op("-").Add(aftAtC("mu")))),
		aftAtC("dvr").Op(op).Id("e").Op("*").Add(aftAtC("r1")),
		aftAtC("dkr").Op(op).Id("e").Op("*").Parens(aftAtC("vr").Op("*").Add(aftAtC("r1")).Op("-").Add(aftAtC("r2"))),
	)
}

// emitAFTBackBi emits the unmasked backward of an AFT kernel.
func emitAFTBackBi(f *jen.File, op catalog.Op, cfg catalog.Config) {
	m := catalog.Of(op.Kind).Bias
	grad := ""
	switch m {
	case catalog.BiasFull:
		grad = "\n\tdw[i·N+j] += Σ_{c<DH} g_ij[c],  i, j < t                  (accumulate)"
	case catalog.BiasLocal:
		grad = "\n\tdw[i·N+j] += Σ_{c<DH} g_ij[c],  |i − j| < S, i, j < t     (accumulate)"
	case catalog.BiasConv:
		grad = "\n\tdu[l]     += Σ_{i−j+S−1=l} Σ_{c<DH} g_ij[c],  l < 2S − 1 (accumulate)"
	}
	doc := fmt.Sprintf(`%s is the unmasked %s backward (kernels.%sFunc) for N = %d, D = %d, DH = %d%s.
With %s, p_ij[c] = exp(k[j·D+c] + b_ij − m[i·D+c]) · rd[i·D+c] and
g_ij[c] = p_ij[c] · dz[i·D+c] · (v[j·D+c] − z[i·D+c]):

	dv[j·D+c]  = Σ_{i<t} p_ij[c] · dz[i·D+c]                    (overwrite)
	dk[j·D+c]  = Σ_{i<t} g_ij[c]                                (overwrite)%s

m and rd are the forward's statistics.%s`, Name(op), op.Kind, op.Kind, cfg.N, cfg.D, cfg.DH, aftWindowDoc(op, m), biBiasDoc(m), grad, biBackAlgoDoc(m))

	body := []jen.Code{aftSizes(op, cfg, m)}
	if m == catalog.BiasConv {
		w := func() *jen.Statement { return jen.Lit(2).Op("*").Id("S").Op("-").Lit(1) }
		body = append(body,
			jen.Id("uw").Op(":=").Id("u").Index(jen.Empty(), w(), w()),
			jen.Id("duw").Op(":=").Id("du").Index(jen.Empty(), w(), w()),
		)
	}
	keyRows := []jen.Code{aftHeadRow("kr", "k", "j"), aftHeadRow("vr", "v", "j"), aftHeadRow("dkr", "dk", "j"), aftHeadRow("dvr", "dv", "j")}
	if m.Scan() {
		body = append(body,
			jen.Comment("Row scan over the rows that see key j without bias: mu = min m_i,"),
			jen.Comment("r1 = Σ exp(mu − m_i)·rd_i·dz_i and r2 = Σ exp(mu − m_i)·rd_i·dz_i·z_i."),
			jen.Var().List(aftID("mu"), aftID("r1"), aftID("r2")).Index(aftID("DH")).Float32(),
			jen.For(jen.Id("c").Op(":=").Range().Id("mu")).Block(aftAtC("mu").Op("=").Add(aftInf(1))),
		)
	}
	if m == catalog.BiasSimple {
		body = append(body, jen.Comment("Every row sees every key: one scan over all the rows."),
			jen.For(jen.Id("i").Op(":=").Lit(0), jen.Id("i").Op("<").Id("t"), jen.Id("i").Op("++")).Block(biRowScanAdd()...),
			jen.For(jen.Id("j").Op(":=").Lit(0), jen.Id("j").Op("<").Id("t"), jen.Id("j").Op("++")).Block(
				append(keyRows, biScanGrad("="))...),
		)
		funcDecl(f, op, doc, body...)
		return
	}
	if m.Scan() {
		fwd := []jen.Code{jen.Comment("Row j − S is the last to see key j without bias from before; add it."),
			jen.If(jen.Id("i").Op(":=").Id("j").Op("-").Id("S"), jen.Id("i").Op(">=").Lit(0)).Block(biRowScanAdd()...)}
		fwd = append(fwd, keyRows...)
		fwd = append(fwd, biScanGrad("="))
		body = append(body, jen.Comment("Forward sweep: the rows i ≤ j − S write dk and dv."),
			jen.For(jen.Id("j").Op(":=").Lit(0), jen.Id("j").Op("<").Id("t"), jen.Id("j").Op("++")).Block(fwd...),
			jen.Comment("Reverse sweep: the rows i ≥ j + S and the window's rows add theirs."))
		body = append(body, biRowScanReset()...)
	}
	var row []jen.Code
	if m.Scan() {
		row = append(row, jen.Comment("Row j + S is the first to see key j without bias from after; add it."),
			jen.If(jen.Id("i").Op(":=").Id("j").Op("+").Id("S"), jen.Id("i").Op("<").Id("t")).Block(biRowScanAdd()...))
	}
	row = append(row, keyRows...)
	if m.Scan() {
		row = append(row, biScanGrad("+="))
	} else {
		row = append(row, jen.Clear(jen.Id("dkr")), jen.Clear(jen.Id("dvr")))
	}
	lo, hi := biWindow(m, "j")
	dst := jen.Id("dw").Index(jen.Id("i").Op("*").Id("N").Op("+").Id("j"))
	if m == catalog.BiasConv {
		dst = jen.Id("duw").Index(jen.Id("i").Op("-").Id("j").Op("+").Id("S").Op("-").Lit(1))
	}
	row = append(row,
		jen.Comment("Rows whose window holds key j."),
		jen.For(jen.Id("i").Op(":=").Add(lo), jen.Id("i").Op("<").Add(hi), jen.Id("i").Op("++")).Block(
			biBias(m),
			aftHeadRow("mr", "m", "i"),
			aftHeadRow("rdr", "rd", "i"),
			aftHeadRow("dzr", "dz", "i"),
			aftHeadRow("zr", "z", "i"),
			jen.Var().Id("gs").Float32(),
			aftForC(
				jen.Id("pd").Op(":=").Add(aftExp(aftAtC("kr").Op("+").Id("b").Op("-").Add(aftAtC("mr")))).Op("*").Add(aftAtC("rdr")).Op("*").Add(aftAtC("dzr")),
				aftAtC("dvr").Op("+=").Id("pd"),
				jen.Id("g").Op(":=").Id("pd").Op("*").Parens(aftAtC("vr").Op("-").Add(aftAtC("zr"))),
				aftAtC("dkr").Op("+=").Id("g"),
				jen.Id("gs").Op("+=").Id("g"),
			),
			dst.Op("+=").Id("gs"),
		))
	body = append(body, jen.For(jen.Id("j").Op(":=").Id("t").Op("-").Lit(1), jen.Id("j").Op(">=").Lit(0), jen.Id("j").Op("--")).Block(row...))
	funcDecl(f, op, doc, body...)
}

func biBackAlgoDoc(m catalog.AFTBias) string {
	switch m {
	case catalog.BiasFull:
		return " Keys j in reverse order, each summing over all the rows."
	case catalog.BiasSimple:
		return ` One scan over all the rows keeps sums shifted by their smallest
statistic mu = min m_i (≥ k_j), so every exponential has a non-positive
argument.`
	}
	return ` The rows that see key j with bias 0 are kept as sums shifted by their
smallest statistic mu = min m_i (≥ k_j): the rows i ≤ j − S in a forward
sweep, which writes dk and dv, the rows i ≥ j + S in a reverse sweep,
which adds them and the window's rows |i − j| < S summed directly.`
}

// emitLinearBi emits the unmasked linear-attention forward.
func emitLinearBi(f *jen.File, op catalog.Op, cfg catalog.Config) {
	doc := fmt.Sprintf(`%s is unmasked linear attention (kernels.LinearFunc) for D = %d, DH = %d,
Heads = %d: with S = Σ_{j<t} fk_j v_jᵀ and z = Σ_{j<t} fk_j, for i < t

	rd[i·Heads] = 1 / (fq_i · z + 1e-6)
	y[i·D+c]    = rd[i·Heads] · Σ_{p<DH} fq[i·D+p] · S[p, c]

(overwrite). A first pass builds S and z, a second the rows.`, Name(op), cfg.D, cfg.DH, cfg.Heads)
	srow := func() jen.Code {
		return jen.Id("sr").Op(":=").Id("s").Index(jen.Id("p").Op("*").Id("DH"), jen.Id("p").Op("*").Id("DH").Op("+").Id("DH"), jen.Id("p").Op("*").Id("DH").Op("+").Id("DH"))
	}
	build := []jen.Code{
		aftHeadRow("fkr", "fk", "i"),
		aftHeadRow("vr", "v", "i"),
		aftForP(
			jen.Id("a").Op(":=").Id("fkr").Index(jen.Id("p")),
			jen.Id("zs").Index(jen.Id("p")).Op("+=").Id("a"),
			srow(),
			aftForC(aftAtC("sr").Op("+=").Id("a").Op("*").Add(aftAtC("vr"))),
		),
	}
	row := []jen.Code{
		aftHeadRow("fqr", "fq", "i"),
		aftHeadRow("yr", "y", "i"),
		jen.Var().Id("den").Float32(),
		aftForP(jen.Id("den").Op("+=").Id("fqr").Index(jen.Id("p")).Op("*").Id("zs").Index(jen.Id("p"))),
		jen.Id("inv").Op(":=").Lit(1).Op("/").Parens(jen.Id("den").Op("+").Lit(1e-6)),
		jen.Id("rd").Index(jen.Id("i").Op("*").Id("Heads")).Op("=").Id("inv"),
		jen.Var().Id("acc").Index(aftID("DH")).Float32(),
		aftForP(
			jen.Id("q").Op(":=").Id("fqr").Index(jen.Id("p")),
			srow(),
			aftForC(aftAtC("acc").Op("+=").Id("q").Op("*").Add(aftAtC("sr"))),
		),
		aftForC(aftAtC("yr").Op("=").Add(aftAtC("acc")).Op("*").Id("inv")),
	}
	funcDecl(f, op, doc,
		constBlock(
			size{"D", cfg.D, "row stride of the head slices"},
			size{"DH", cfg.DH, "head width"},
			size{"Heads", cfg.Heads, "row stride of rd"},
		),
		jen.Var().Id("s").Index(jen.Id("DH").Op("*").Id("DH")).Float32().Comment("S[p, c] at s[p·DH+c]"),
		jen.Var().Id("zs").Index(aftID("DH")).Float32(),
		forRows(build...),
		forRows(row...),
	)
}

// emitLinearBackBi emits the unmasked linear-attention backward.
func emitLinearBackBi(f *jen.File, op catalog.Op, cfg catalog.Config) {
	doc := fmt.Sprintf(`%s is the backward of unmasked linear attention (kernels.LinearBackFunc)
for D = %d, DH = %d, Heads = %d. With a_i = rd_i·dy_i, b_i = −rd_i·(dy_i · y_i),
S = Σ_{j<t} fk_j v_jᵀ and z = Σ_{j<t} fk_j it overwrites

	dfq[i·D+p] = Σ_c S[p, c]·a_i[c] + b_i·z[p]
	dfk[j·D+p] = Σ_{i<t} (a_i · v_j + b_i) · fq[i·D+p]
	dv[j·D+c]  = Σ_{i<t} (fq_i · fk_j) · a_i[c]

dfq from S and z, then dfk and dv from G = Σ_i fq_i a_iᵀ and
h = Σ_i b_i fq_i.`, Name(op), cfg.D, cfg.DH, cfg.Heads)
	srow := func() jen.Code {
		return jen.Id("sr").Op(":=").Id("s").Index(jen.Id("p").Op("*").Id("DH"), jen.Id("p").Op("*").Id("DH").Op("+").Id("DH"), jen.Id("p").Op("*").Id("DH").Op("+").Id("DH"))
	}
	dot := []jen.Code{
		jen.Var().Id("dyy").Float32(),
		aftForC(jen.Id("dyy").Op("+=").Add(aftAtC("dyr")).Op("*").Add(aftAtC("yr"))),
	}
	build := []jen.Code{
		aftHeadRow("fkr", "fk", "i"),
		aftHeadRow("vr", "v", "i"),
		aftForP(
			jen.Id("a").Op(":=").Id("fkr").Index(jen.Id("p")),
			jen.Id("zs").Index(jen.Id("p")).Op("+=").Id("a"),
			srow(),
			aftForC(aftAtC("sr").Op("+=").Id("a").Op("*").Add(aftAtC("vr"))),
		),
	}
	dfq := []jen.Code{
		aftHeadRow("dyr", "dy", "i"),
		aftHeadRow("yr", "y", "i"),
		aftHeadRow("dfqr", "dfq", "i"),
		jen.Id("inv").Op(":=").Id("rd").Index(jen.Id("i").Op("*").Id("Heads")),
	}
	dfq = append(dfq, dot...)
	dfq = append(dfq, aftForP(
		srow(),
		jen.Var().Id("acc").Float32(),
		aftForC(jen.Id("acc").Op("+=").Add(aftAtC("sr")).Op("*").Add(aftAtC("dyr"))),
		jen.Id("dfqr").Index(jen.Id("p")).Op("=").Id("inv").Op("*").Parens(jen.Id("acc").Op("-").Id("dyy").Op("*").Id("zs").Index(jen.Id("p"))),
	))
	gsum := []jen.Code{
		aftHeadRow("fqr", "fq", "i"),
		aftHeadRow("dyr", "dy", "i"),
		aftHeadRow("yr", "y", "i"),
		jen.Id("inv").Op(":=").Id("rd").Index(jen.Id("i").Op("*").Id("Heads")),
	}
	gsum = append(gsum, dot...)
	gsum = append(gsum,
		jen.Id("bi").Op(":=").Op("-").Id("inv").Op("*").Id("dyy"),
		aftForP(
			jen.Id("q").Op(":=").Id("fqr").Index(jen.Id("p")),
			jen.Id("hs").Index(jen.Id("p")).Op("+=").Id("bi").Op("*").Id("q"),
			jen.Id("qi").Op(":=").Id("q").Op("*").Id("inv"),
			srow(),
			aftForC(aftAtC("sr").Op("+=").Id("qi").Op("*").Add(aftAtC("dyr"))),
		),
	)
	keys := []jen.Code{
		aftHeadRow("fkr", "fk", "j"),
		aftHeadRow("vr", "v", "j"),
		aftHeadRow("dfkr", "dfk", "j"),
		aftHeadRow("dvr", "dv", "j"),
		jen.Var().Id("acc").Index(aftID("DH")).Float32(),
		aftForP(
			srow(),
			jen.Id("kp").Op(":=").Id("fkr").Index(jen.Id("p")),
			jen.Var().Id("sv").Float32(),
			aftForC(
				jen.Id("sv").Op("+=").Add(aftAtC("sr")).Op("*").Add(aftAtC("vr")),
				aftAtC("acc").Op("+=").Id("kp").Op("*").Add(aftAtC("sr")),
			),
			jen.Id("dfkr").Index(jen.Id("p")).Op("=").Id("sv").Op("+").Id("hs").Index(jen.Id("p")),
		),
		jen.Copy(jen.Id("dvr"), jen.Id("acc").Index(jen.Empty(), jen.Empty())),
	}
	funcDecl(f, op, doc,
		constBlock(
			size{"D", cfg.D, "row stride of the head slices"},
			size{"DH", cfg.DH, "head width"},
			size{"Heads", cfg.Heads, "row stride of rd"},
		),
		jen.Var().Id("s").Index(jen.Id("DH").Op("*").Id("DH")).Float32().Comment("S, then G, at s[p·DH+c]"),
		jen.Var().List(aftID("zs"), aftID("hs")).Index(aftID("DH")).Float32(),
		jen.Comment("S and z, then dfq."),
		forRows(build...),
		forRows(dfq...),
		jen.Comment("G and h, then dfk and dv."),
		jen.Clear(jen.Id("s").Index(jen.Empty(), jen.Empty())),
		forRows(gsum...),
		jen.For(jen.Id("j").Op(":=").Lit(0), jen.Id("j").Op("<").Id("t"), jen.Id("j").Op("++")).Block(keys...),
	)
}
