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

// biAddKey adds key j to the scan (r, sa, sb) if 0 ≤ j < t.
func biAddKey(j jen.Code) jen.Code {
	return jen.If(jen.Id("j").Op(":=").Add(j), jen.Id("j").Op(">=").Lit(0).Op("&&").Id("j").Op("<").Id("t")).Block(aftKeyScanAdd()...)
}

// biConvWidth is the bidirectional conv window's width, 2S − 1.
func biConvWidth() *jen.Statement { return jen.Lit(2).Op("*").Id("S").Op("-").Lit(1) }

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
		body = append(body, aftConvSlices(biConvWidth, false)...)
	}
	switch {
	case m == catalog.BiasSimple:
		body = append(body, jen.Comment("One scan over all the keys; every row gets its result."))
		body = append(body, aftScanState("r", -1, "sa", "sb")...)
		body = append(body,
			aftFor("j", aftKeyScanAdd()...),
			forRows(append(aftOutRows(), aftPutRow("sa", "r", "sb"))...))
		funcDecl(f, op, doc, body...)
		return
	case m.Scan():
		body = append(body, jen.Comment("Reverse sweep: the suffix scan over the keys j ≥ i + S, parked in row i"),
			jen.Comment("of the outputs (r in m, sa in z, sb in rd)."))
		body = append(body, aftScanState("r", -1, "sa", "sb")...)
		park := append([]jen.Code{biAddKey(jen.Id("i").Op("+").Id("S"))}, aftOutRows()...)
		park = append(park, aftForC(
			aftAtC("mr").Op("=").Add(aftAtC("r")),
			aftAtC("zr").Op("=").Add(aftAtC("sa")),
			aftAtC("rdr").Op("=").Add(aftAtC("sb")),
		))
		body = append(body, aftForBack("i", park...), jen.Comment("Forward sweep: the prefix scan over the keys j ≤ i − S."))
		body = append(body, aftScanReset("r", -1, "sa", "sb")...)
	}
	body = append(body, jen.Var().List(aftID("mx"), aftID("num"), aftID("den")).Index(aftID("DH")).Float32())

	var row []jen.Code
	if m.Scan() {
		row = append(row, jen.Comment("Add key i − S, which leaves the window at row i."), biAddKey(jen.Id("i").Op("-").Id("S")))
	}
	row = append(row, aftOutRows()...)
	row = append(row,
		jen.Id("j0").Op(",").Id("j1").Op(":=").List(aftWindowLo(m, "i"), aftWindowHi(m, "i")),
		jen.Comment("The row maximum: of the scans and of the keys in the window."))
	if m.Scan() {
		row = append(row, aftForC(aftAtC("mx").Op("=").Max(aftAtC("r"), aftAtC("mr"))))
	} else {
		row = append(row, aftForC(aftAtC("mx").Op("=").Add(aftInf(-1))))
	}
	row = append(row, aftWindowMax(m, true))
	if m.Scan() {
		row = append(row, aftForC(
			jen.Id("e").Op(":=").Add(aftExp(aftAtC("r").Op("-").Add(aftAtC("mx")))),
			jen.Id("es").Op(":=").Add(aftExp(aftAtC("mr").Op("-").Add(aftAtC("mx")))),
			aftAtC("num").Op("=").Add(aftAtC("sa")).Op("*").Id("e").Op("+").Add(aftAtC("zr")).Op("*").Id("es"),
			aftAtC("den").Op("=").Add(aftAtC("sb")).Op("*").Id("e").Op("+").Add(aftAtC("rdr")).Op("*").Id("es"),
		))
	} else {
		row = append(row, aftClear("num", "den")...)
	}
	row = append(row, aftWindowSum(m, true), aftPutRow("num", "mx", "den"))
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
		body = append(body, aftConvSlices(biConvWidth, true)...)
	}
	keyRows := []jen.Code{aftHeadRow("kr", "k", "j"), aftHeadRow("vr", "v", "j"), aftHeadRow("dkr", "dk", "j"), aftHeadRow("dvr", "dv", "j")}
	if m.Scan() {
		body = append(body, aftRowScanState("Row scan")...)
	}
	if m == catalog.BiasSimple {
		body = append(body, jen.Comment("Every row sees every key: one scan over all the rows."),
			forRows(aftRowScanAdd()...),
			aftFor("j", append(keyRows, aftScanGrad("dkr", "dvr", "="))...),
		)
		funcDecl(f, op, doc, body...)
		return
	}
	if m.Scan() {
		fwd := []jen.Code{jen.Comment("Row j − S is the last to see key j without bias from before; add it."),
			jen.If(jen.Id("i").Op(":=").Id("j").Op("-").Id("S"), jen.Id("i").Op(">=").Lit(0)).Block(aftRowScanAdd()...)}
		fwd = append(fwd, keyRows...)
		fwd = append(fwd, aftScanGrad("dkr", "dvr", "="))
		body = append(body, jen.Comment("Forward sweep: the rows i ≤ j − S write dk and dv."),
			aftFor("j", fwd...),
			jen.Comment("Reverse sweep: the rows i ≥ j + S and the window's rows add theirs."))
		body = append(body, aftScanReset("mu", 1, "r1", "r2")...)
	}
	var row []jen.Code
	if m.Scan() {
		row = append(row, jen.Comment("Row j + S is the first to see key j without bias from after; add it."),
			jen.If(jen.Id("i").Op(":=").Id("j").Op("+").Id("S"), jen.Id("i").Op("<").Id("t")).Block(aftRowScanAdd()...))
	}
	row = append(row, keyRows...)
	if m.Scan() {
		row = append(row, aftScanGrad("dkr", "dvr", "+="))
	} else {
		row = append(row, jen.Clear(jen.Id("dkr")), jen.Clear(jen.Id("dvr")))
	}
	row = append(row, aftWindowRows(m, true, aftWindowLo(m, "j"), aftWindowHi(m, "j"), "dkr", "dvr")...)
	body = append(body, aftForBack("j", row...))
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
	build := []jen.Code{
		aftHeadRow("fkr", "fk", "i"),
		aftHeadRow("vr", "v", "i"),
		linAddKV(),
	}
	row := append([]jen.Code{aftHeadRow("fqr", "fq", "i"), aftHeadRow("yr", "y", "i")}, linOutRow()...)
	funcDecl(f, op, doc,
		linSizes(cfg),
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
	build := []jen.Code{
		aftHeadRow("fkr", "fk", "i"),
		aftHeadRow("vr", "v", "i"),
		linAddKV(),
	}
	dfq := []jen.Code{
		aftHeadRow("dyr", "dy", "i"),
		aftHeadRow("yr", "y", "i"),
		aftHeadRow("dfqr", "dfq", "i"),
		jen.Id("inv").Op(":=").Id("rd").Index(jen.Id("i").Op("*").Id("Heads")),
	}
	dfq = append(dfq, linDyDotY()...)
	dfq = append(dfq, linDfq())
	gsum := []jen.Code{
		aftHeadRow("fqr", "fq", "i"),
		aftHeadRow("dyr", "dy", "i"),
		aftHeadRow("yr", "y", "i"),
		jen.Id("inv").Op(":=").Id("rd").Index(jen.Id("i").Op("*").Id("Heads")),
	}
	gsum = append(gsum, linDyDotY()...)
	gsum = append(gsum,
		jen.Id("bi").Op(":=").Op("-").Id("inv").Op("*").Id("dyy"),
		aftForP(
			jen.Id("q").Op(":=").Id("fqr").Index(jen.Id("p")),
			jen.Id("hs").Index(jen.Id("p")).Op("+=").Id("bi").Op("*").Id("q"),
			jen.Id("qi").Op(":=").Id("q").Op("*").Id("inv"),
			linSRow(),
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
			linSRow(),
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
		linSizes(cfg),
		jen.Var().Id("s").Index(jen.Id("DH").Op("*").Id("DH")).Float32().Comment("S, then G, at s[p·DH+c]"),
		jen.Var().List(aftID("zs"), aftID("hs")).Index(aftID("DH")).Float32(),
		jen.Comment("S and z, then dfq."),
		forRows(build...),
		forRows(dfq...),
		jen.Comment("G and h, then dfk and dv."),
		jen.Clear(jen.Id("s").Index(jen.Empty(), jen.Empty())),
		forRows(gsum...),
		aftFor("j", keys...),
	)
}
