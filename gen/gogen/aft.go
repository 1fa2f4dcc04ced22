package gogen

// Emitters of the attention-free kernels (aft_full, aft_local, aft_conv,
// aft_simple) and of causal linear attention. The formulas are those of the
// function types in runtime/kernels; the algorithms, shared with the
// assembly of gen/asmgen, are:
//
//   - AFT forward, per row i and channel: the keys j ≤ i − S outside the
//     window (bias 0) are kept as a running scan (their maximum r and the
//     sums Σ exp(k_j − r)·v_j, Σ exp(k_j − r)), the keys inside the window
//     are summed directly after a first pass for their maximum. Both parts
//     are positive sums shifted by the row maximum m, so nothing cancels and
//     nothing overflows. aft_full is the case S = ∞ (no scan), aft_simple
//     S = 0 (no window).
//   - AFT backward, a reverse sweep over the keys j: the rows i ≥ j + S see
//     key j with bias 0, so their contribution is exp(k_j − μ) times a
//     running suffix sum over those rows shifted by their minimum statistic
//     μ = min m_i (≥ k_j); the window rows j ≤ i < j + S are summed directly
//     and give the bias gradient.
//   - Linear: the DH×DH state S_i is kept and updated row by row; the
//     backward is a forward sweep for dfq and a reverse sweep with the
//     suffix state G_j = Σ_{i≥j} fq_i a_iᵀ for dfk and dv.
//
// Exponentials are math.Exp in float64 of an argument formed in float32
// exactly as the assembly forms it; sums are float32.

import (
	"fmt"

	"github.com/dave/jennifer/jen"

	"github.com/synthgen/synthgen/gen/catalog"
)

// aftBiasDoc describes b_ij for the doc comments.
func aftBiasDoc(m catalog.AFTBias) string {
	switch m {
	case catalog.BiasFull:
		return "b_ij = w[i·N+j]"
	case catalog.BiasLocal:
		return "b_ij = w[i·N+j] for i − j < S, 0 for i − j ≥ S"
	case catalog.BiasConv:
		return "b_ij = u[i−j] for i − j < S, 0 for i − j ≥ S"
	}
	return "b_ij = 0"
}

// aftID is jen.Id.
func aftID(name string) *jen.Statement { return jen.Id(name) }

// aftAtC is name[c].
func aftAtC(name string) *jen.Statement { return jen.Id(name).Index(jen.Id("c")) }

// aftHeadRow declares name := slice[r*D : r*D+DH : r*D+DH], row r of a head slice.
func aftHeadRow(name, slice, r string) jen.Code {
	lo := func() *jen.Statement { return jen.Id(r).Op("*").Id("D") }
	return jen.Id(name).Op(":=").Id(slice).Index(lo(), lo().Op("+").Id("DH"), lo().Op("+").Id("DH"))
}

// aftForC is `for c := range DH { body }`.
func aftForC(body ...jen.Code) jen.Code {
	return jen.For(jen.Id("c").Op(":=").Range().Id("DH")).Block(body...)
}

// aftForP is `for p := range DH { body }`.
func aftForP(body ...jen.Code) jen.Code {
	return jen.For(jen.Id("p").Op(":=").Range().Id("DH")).Block(body...)
}

// aftExp is float32(math.Exp(float64(x))).
func aftExp(x jen.Code) *jen.Statement {
	return jen.Float32().Call(jen.Qual("math", "Exp").Call(jen.Float64().Call(x)))
}

// aftInf is float32(math.Inf(sign)).
func aftInf(sign int) *jen.Statement {
	return jen.Float32().Call(jen.Qual("math", "Inf").Call(jen.Lit(sign)))
}

// aftSizes declares the constants of an AFT kernel.
func aftSizes(op catalog.Op, cfg catalog.Config, m catalog.AFTBias) jen.Code {
	sz := []size{}
	if m == catalog.BiasFull || m == catalog.BiasLocal {
		sz = append(sz, size{"N", cfg.N, "row stride of w"})
	}
	sz = append(sz,
		size{"D", cfg.D, "row stride of the head slices"},
		size{"DH", cfg.DH, "head width"},
	)
	if m == catalog.BiasLocal || m == catalog.BiasConv {
		sz = append(sz, size{"S", op.Window, "window"})
	}
	return constBlock(sz...)
}

// aftFor is `for v := 0; v < t; v++ { body }`, over the keys or rows.
func aftFor(v string, body ...jen.Code) jen.Code {
	return jen.For(jen.Id(v).Op(":=").Lit(0), jen.Id(v).Op("<").Id("t"), jen.Id(v).Op("++")).Block(body...)
}

// aftForBack is `for v := t - 1; v >= 0; v-- { body }`, a reverse sweep.
func aftForBack(v string, body ...jen.Code) jen.Code {
	return jen.For(jen.Id(v).Op(":=").Id("t").Op("-").Lit(1), jen.Id(v).Op(">=").Lit(0), jen.Id(v).Op("--")).Block(body...)
}

// aftClear sets each [DH]float32 array of names to zero.
func aftClear(names ...string) []jen.Code {
	var out []jen.Code
	for _, n := range names {
		out = append(out, jen.Id(n).Op("=").Index(aftID("DH")).Float32().Values())
	}
	return out
}

// aftConvSlices declares uw, the conv bias cut to the window's w = width()
// entries (causal S, bidirectional 2S − 1), and for a backward duw, its
// gradient.
func aftConvSlices(width func() *jen.Statement, back bool) []jen.Code {
	out := []jen.Code{jen.Id("uw").Op(":=").Id("u").Index(jen.Empty(), width(), width())}
	if back {
		out = append(out, jen.Id("duw").Op(":=").Id("du").Index(jen.Empty(), width(), width()))
	}
	return out
}

// aftBiasAt is the bias of key j in row i (inside the window), in w (or
// uw) with prefix "", in its gradient dw (or duw) with prefix "d". The
// bidirectional conv window is centred: u[i−j+S−1].
func aftBiasAt(m catalog.AFTBias, bi bool, prefix string) *jen.Statement {
	if m == catalog.BiasConv {
		l := jen.Id("i").Op("-").Id("j")
		if bi {
			l = l.Op("+").Id("S").Op("-").Lit(1)
		}
		return jen.Id(prefix + "uw").Index(l)
	}
	return jen.Id(prefix + "w").Index(jen.Id("i").Op("*").Id("N").Op("+").Id("j"))
}

// aftBias declares b, the bias of key j in row i (inside the window).
func aftBias(m catalog.AFTBias, bi bool) jen.Code {
	return jen.Id("b").Op(":=").Add(aftBiasAt(m, bi, ""))
}

// aftWindowLo is the first key (or row) of the window around x:
// max(x − S + 1, 0) (aft_full: 0).
func aftWindowLo(m catalog.AFTBias, x string) jen.Code {
	if m == catalog.BiasFull {
		return jen.Lit(0)
	}
	return jen.Max(jen.Id(x).Op("-").Id("S").Op("+").Lit(1), jen.Lit(0))
}

// aftWindowHi is the end of the window around x: min(x + S, t) (aft_full: t).
func aftWindowHi(m catalog.AFTBias, x string) jen.Code {
	if m == catalog.BiasFull {
		return jen.Id("t")
	}
	return jen.Min(jen.Id(x).Op("+").Id("S"), jen.Id("t"))
}

// aftScanRef sets every channel of a scan's reference ref to ±∞ (sign).
func aftScanRef(ref string, sign int) jen.Code {
	return jen.For(jen.Id("c").Op(":=").Range().Id(ref)).Block(aftAtC(ref).Op("=").Add(aftInf(sign)))
}

// aftScanState declares an empty scan: its reference ref = ±∞ (sign) and
// its sums s1, s2 = 0. The forward's key scan is (r, sa, sb, −∞), the
// backward's row scan (mu, r1, r2, +∞).
func aftScanState(ref string, sign int, s1, s2 string) []jen.Code {
	return []jen.Code{
		jen.Var().List(aftID(ref), aftID(s1), aftID(s2)).Index(aftID("DH")).Float32(),
		aftScanRef(ref, sign),
	}
}

// aftScanReset empties a scan declared by aftScanState again.
func aftScanReset(ref string, sign int, s1, s2 string) []jen.Code {
	return append([]jen.Code{aftScanRef(ref, sign)}, aftClear(s1, s2)...)
}

// aftRowScanState declares the backward's row scan, with its comment
// (what: how the kernel uses it).
func aftRowScanState(what string) []jen.Code {
	return append([]jen.Code{
		jen.Comment(what + " over the rows that see key j without bias: mu = min m_i,"),
		jen.Comment("r1 = Σ exp(mu − m_i)·rd_i·dz_i and r2 = Σ exp(mu − m_i)·rd_i·dz_i·z_i."),
	}, aftScanState("mu", 1, "r1", "r2")...)
}

// aftOutRows declares zr, mr and rdr, row i of the forward's outputs.
func aftOutRows() []jen.Code {
	return []jen.Code{aftHeadRow("zr", "z", "i"), aftHeadRow("mr", "m", "i"), aftHeadRow("rdr", "rd", "i")}
}

// aftPutRow stores row i of the forward's outputs from the sums num, den
// shifted by the row maximum mx: z = num/den, m = mx, rd = 1/den.
func aftPutRow(num, mx, den string) jen.Code {
	return aftForC(
		jen.Id("inv").Op(":=").Lit(1).Op("/").Add(aftAtC(den)),
		aftAtC("zr").Op("=").Add(aftAtC(num)).Op("*").Id("inv"),
		aftAtC("mr").Op("=").Add(aftAtC(mx)),
		aftAtC("rdr").Op("=").Id("inv"),
	)
}

// aftForWindowKeys is the loop over the window's keys j from j0: up to i
// (causal) or to j1 (bidirectional).
func aftForWindowKeys(bi bool, body ...jen.Code) jen.Code {
	cond := jen.Id("j").Op("<=").Id("i")
	if bi {
		cond = jen.Id("j").Op("<").Id("j1")
	}
	return jen.For(jen.Id("j").Op(":=").Id("j0"), cond, jen.Id("j").Op("++")).Block(body...)
}

// aftWindowMax raises the row maximum mx to the window's keys k_j + b_ij.
func aftWindowMax(m catalog.AFTBias, bi bool) jen.Code {
	return aftForWindowKeys(bi,
		aftBias(m, bi),
		aftHeadRow("kr", "k", "j"),
		aftForC(aftAtC("mx").Op("=").Max(aftAtC("mx"), aftAtC("kr").Op("+").Id("b"))),
	)
}

// aftWindowSum adds the window's keys to num and den, shifted by mx.
func aftWindowSum(m catalog.AFTBias, bi bool) jen.Code {
	return aftForWindowKeys(bi,
		aftBias(m, bi),
		aftHeadRow("kr", "k", "j"),
		aftHeadRow("vr", "v", "j"),
		aftForC(
			jen.Id("e").Op(":=").Add(aftExp(aftAtC("kr").Op("+").Id("b").Op("-").Add(aftAtC("mx")))),
			aftAtC("num").Op("+=").Id("e").Op("*").Add(aftAtC("vr")),
			aftAtC("den").Op("+=").Id("e"),
		),
	)
}

// aftScanGrad sets (op "=") or adds (op "+=") key j's gradients gk, gv
// from the row scan: exp(k_j − mu) ≤ 1 times the sums.
func aftScanGrad(gk, gv, op string) jen.Code {
	return aftForC(
		jen.Id("e").Op(":=").Add(aftExp(aftAtC("kr").Op("-").Add(aftAtC("mu")))),
		aftAtC(gv).Op(op).Id("e").Op("*").Add(aftAtC("r1")),
		aftAtC(gk).Op(op).Id("e").Op("*").Parens(aftAtC("vr").Op("*").Add(aftAtC("r1")).Op("-").Add(aftAtC("r2"))),
	)
}

// aftWindowRows adds to key j's gradients gk, gv those of the rows
// lo ≤ i < hi whose window holds it, and to the bias gradient the lane
// sums.
func aftWindowRows(m catalog.AFTBias, bi bool, lo, hi jen.Code, gk, gv string) []jen.Code {
	return []jen.Code{
		jen.Comment("Rows whose window holds key j."),
		jen.For(jen.Id("i").Op(":=").Add(lo), jen.Id("i").Op("<").Add(hi), jen.Id("i").Op("++")).Block(
			aftBias(m, bi),
			aftHeadRow("mr", "m", "i"),
			aftHeadRow("rdr", "rd", "i"),
			aftHeadRow("dzr", "dz", "i"),
			aftHeadRow("zr", "z", "i"),
			jen.Var().Id("gs").Float32(),
			aftForC(
				jen.Id("pd").Op(":=").Add(aftExp(aftAtC("kr").Op("+").Id("b").Op("-").Add(aftAtC("mr")))).Op("*").Add(aftAtC("rdr")).Op("*").Add(aftAtC("dzr")),
				aftAtC(gv).Op("+=").Id("pd"),
				jen.Id("g").Op(":=").Id("pd").Op("*").Parens(aftAtC("vr").Op("-").Add(aftAtC("zr"))),
				aftAtC(gk).Op("+=").Id("g"),
				jen.Id("gs").Op("+=").Id("g"),
			),
			aftBiasAt(m, bi, "d").Op("+=").Id("gs"),
		),
	}
}

// emitAFT emits the forward of an AFT kernel.
func emitAFT(f *jen.File, op catalog.Op, cfg catalog.Config) {
	if cfg.Bidirectional {
		emitAFTBi(f, op, cfg)
		return
	}
	m := catalog.Of(op.Kind).Bias
	doc := fmt.Sprintf(`%s is the %s forward (kernels.%sFunc) for N = %d, D = %d, DH = %d%s:
for i < t and c < DH, with %s and e_ij[c] = k[j·D+c] + b_ij,

	m[i·D+c]  = max_{j≤i} e_ij[c]
	rd[i·D+c] = 1 / Σ_{j≤i} exp(e_ij[c] − m[i·D+c])
	z[i·D+c]  = rd[i·D+c] · Σ_{j≤i} exp(e_ij[c] − m[i·D+c]) · v[j·D+c]

(overwrite).%s`, Name(op), op.Kind, op.Kind, cfg.N, cfg.D, cfg.DH, aftWindowDoc(op, m), aftBiasDoc(m), aftFwdAlgoDoc(m))

	body := []jen.Code{aftSizes(op, cfg, m)}
	if m == catalog.BiasConv {
		body = append(body, aftConvSlices(func() *jen.Statement { return jen.Id("S") }, false)...)
	}
	if m.Scan() {
		body = append(body,
			jen.Comment("Scan over the keys without bias: their running maximum r and the sums"),
			jen.Comment("sa = Σ exp(k_j − r)·v_j and sb = Σ exp(k_j − r)."))
		body = append(body, aftScanState("r", -1, "sa", "sb")...)
	}
	if m.Window() {
		body = append(body, jen.Var().List(aftID("mx"), aftID("num"), aftID("den")).Index(aftID("DH")).Float32())
	}

	var row []jen.Code
	if m.Scan() {
		lag := jen.Id("i").Op("-").Id("S")
		what := "Add key i − S, which leaves the window at row i"
		if m == catalog.BiasSimple {
			lag = jen.Id("i")
			what = "Add key i"
		}
		row = append(row, jen.Comment(what+"."),
			jen.If(jen.Id("j").Op(":=").Add(lag), jen.Id("j").Op(">=").Lit(0)).Block(aftKeyScanAdd()...))
	}
	row = append(row, aftOutRows()...)
	if !m.Window() {
		row = append(row, aftPutRow("sa", "r", "sb"))
	} else {
		row = append(row, jen.Id("j0").Op(":=").Add(aftWindowLo(m, "i")),
			jen.Comment("The row maximum: of the scan and of the keys in the window."))
		if m.Scan() {
			row = append(row, jen.Id("mx").Op("=").Id("r"))
		} else {
			row = append(row, aftForC(aftAtC("mx").Op("=").Add(aftInf(-1))))
		}
		row = append(row, aftWindowMax(m, false))
		if m.Scan() {
			row = append(row, aftForC(
				jen.Id("e").Op(":=").Add(aftExp(aftAtC("r").Op("-").Add(aftAtC("mx")))),
				aftAtC("num").Op("=").Add(aftAtC("sa")).Op("*").Id("e"),
				aftAtC("den").Op("=").Add(aftAtC("sb")).Op("*").Id("e"),
			))
		} else {
			row = append(row, aftClear("num", "den")...)
		}
		row = append(row, aftWindowSum(m, false), aftPutRow("num", "mx", "den"))
	}
	body = append(body, forRows(row...))
	funcDecl(f, op, doc, body...)
}

func aftWindowDoc(op catalog.Op, m catalog.AFTBias) string {
	if m == catalog.BiasLocal || m == catalog.BiasConv {
		return fmt.Sprintf(", window S = %d", op.Window)
	}
	return ""
}

func aftFwdAlgoDoc(m catalog.AFTBias) string {
	switch m {
	case catalog.BiasFull:
		return " Per row, a first pass over the keys finds m, a second sums the\nexponentials."
	case catalog.BiasSimple:
		return " One causal scan keeps the running maximum and the sums shifted by it."
	}
	return ` The keys j ≤ i − S (bias 0) are kept as a causal scan (running
maximum and sums shifted by it), the keys of the window are summed
directly after a pass for their maximum; both parts are positive sums
shifted by m, so nothing cancels.`
}

// aftKeyScanAdd adds key j (its rows kr, vr) to the running scan
// (r, sa, sb), with one exponential of a non-positive argument per channel.
func aftKeyScanAdd() []jen.Code {
	return []jen.Code{
		aftHeadRow("kr", "k", "j"),
		aftHeadRow("vr", "v", "j"),
		aftForC(
			jen.If(jen.Id("x").Op(":=").Add(aftAtC("kr")), jen.Id("x").Op(">").Add(aftAtC("r"))).Block(
				jen.Id("e").Op(":=").Add(aftExp(aftAtC("r").Op("-").Id("x"))),
				aftAtC("sa").Op("=").Add(aftAtC("sa")).Op("*").Id("e").Op("+").Add(aftAtC("vr")),
				aftAtC("sb").Op("=").Add(aftAtC("sb")).Op("*").Id("e").Op("+").Lit(1),
				aftAtC("r").Op("=").Id("x"),
			).Else().Block(
				jen.Id("e").Op(":=").Add(aftExp(jen.Id("x").Op("-").Add(aftAtC("r")))),
				aftAtC("sa").Op("+=").Id("e").Op("*").Add(aftAtC("vr")),
				aftAtC("sb").Op("+=").Id("e"),
			),
		),
	}
}

// aftRowScanAdd adds row i (its rows of m, rd, dz, z) to the backward's
// row scan (mu, r1, r2), with one exponential of a non-positive argument
// per channel.
func aftRowScanAdd() []jen.Code {
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

// emitAFTBack emits the backward of an AFT kernel.
func emitAFTBack(f *jen.File, op catalog.Op, cfg catalog.Config) {
	if cfg.Bidirectional {
		emitAFTBackBi(f, op, cfg)
		return
	}
	m := catalog.Of(op.Kind).Bias
	grad := ""
	switch m {
	case catalog.BiasFull:
		grad = "\n\tdw[i·N+j] += Σ_{c<DH} g_ij[c],  j ≤ i < t                (accumulate)"
	case catalog.BiasLocal:
		grad = "\n\tdw[i·N+j] += Σ_{c<DH} g_ij[c],  i − S < j ≤ i < t        (accumulate)"
	case catalog.BiasConv:
		grad = "\n\tdu[l]     += Σ_{i−j=l} Σ_{c<DH} g_ij[c],  l < S         (accumulate)"
	}
	doc := fmt.Sprintf(`%s is the %s backward (kernels.%sFunc) for N = %d, D = %d, DH = %d%s.
With %s, p_ij[c] = exp(k[j·D+c] + b_ij − m[i·D+c]) · rd[i·D+c] and
g_ij[c] = p_ij[c] · dz[i·D+c] · (v[j·D+c] − z[i·D+c]):

	dv[j·D+c]  = Σ_{j≤i<t} p_ij[c] · dz[i·D+c]                  (overwrite)
	dk[j·D+c]  = Σ_{j≤i<t} g_ij[c]                              (overwrite)%s

m and rd are the forward's statistics.%s`, Name(op), op.Kind, op.Kind, cfg.N, cfg.D, cfg.DH, aftWindowDoc(op, m), aftBiasDoc(m), grad, aftBackAlgoDoc(m))

	body := []jen.Code{aftSizes(op, cfg, m)}
	if m == catalog.BiasConv {
		body = append(body, aftConvSlices(func() *jen.Statement { return jen.Id("S") }, true)...)
	}
	if m.Scan() {
		body = append(body, aftRowScanState("Suffix state")...)
	}
	body = append(body, jen.Var().List(aftID("gk"), aftID("gv")).Index(aftID("DH")).Float32())

	var row []jen.Code
	if m.Scan() {
		lead := jen.Id("j").Op("+").Id("S")
		what := "Row j + S is the first to see key j without bias; add it."
		if m == catalog.BiasSimple {
			lead = jen.Id("j")
			what = "Add row j."
		}
		row = append(row, jen.Comment(what),
			jen.If(jen.Id("i").Op(":=").Add(lead), jen.Id("i").Op("<").Id("t")).Block(aftRowScanAdd()...))
	}
	row = append(row, aftHeadRow("kr", "k", "j"), aftHeadRow("vr", "v", "j"))
	if m.Scan() {
		row = append(row, jen.Comment("Rows without bias: exp(k_j − mu) ≤ 1 times the suffix sums."), aftScanGrad("gk", "gv", "="))
	} else {
		row = append(row, aftClear("gk", "gv")...)
	}
	if m.Window() {
		row = append(row, aftWindowRows(m, false, jen.Id("j"), aftWindowHi(m, "j"), "gk", "gv")...)
	}
	row = append(row,
		jen.Copy(jen.Id("dk").Index(jen.Id("j").Op("*").Id("D"), jen.Id("j").Op("*").Id("D").Op("+").Id("DH")), jen.Id("gk").Index(jen.Empty(), jen.Empty())),
		jen.Copy(jen.Id("dv").Index(jen.Id("j").Op("*").Id("D"), jen.Id("j").Op("*").Id("D").Op("+").Id("DH")), jen.Id("gv").Index(jen.Empty(), jen.Empty())),
	)
	body = append(body, aftForBack("j", row...))
	funcDecl(f, op, doc, body...)
}

func aftBackAlgoDoc(m catalog.AFTBias) string {
	switch m {
	case catalog.BiasFull:
		return " Keys j in reverse order, each summing over its rows i ≥ j."
	case catalog.BiasSimple:
		return ` A reverse sweep over the keys j keeps suffix sums over the rows
i ≥ j shifted by their smallest statistic mu = min m_i (≥ k_j), so every
exponential has a non-positive argument.`
	}
	return ` A reverse sweep over the keys j: the rows i ≥ j + S, which see
key j with bias 0, are kept as suffix sums shifted by their smallest
statistic mu = min m_i (≥ k_j); the window rows j ≤ i < j + S are summed
directly.`
}

// linSizes declares the constants of a linear-attention kernel.
func linSizes(cfg catalog.Config) jen.Code {
	return constBlock(
		size{"D", cfg.D, "row stride of the head slices"},
		size{"DH", cfg.DH, "head width"},
		size{"Heads", cfg.Heads, "row stride of rd"},
	)
}

// linSRow declares sr, row p of the DH×DH state s.
func linSRow() jen.Code {
	return jen.Id("sr").Op(":=").Id("s").Index(jen.Id("p").Op("*").Id("DH"), jen.Id("p").Op("*").Id("DH").Op("+").Id("DH"), jen.Id("p").Op("*").Id("DH").Op("+").Id("DH"))
}

// linAddKV adds row i's key and value (fkr, vr) to the state: S += fk_i v_iᵀ,
// z += fk_i.
func linAddKV() jen.Code {
	return aftForP(
		jen.Id("a").Op(":=").Id("fkr").Index(jen.Id("p")),
		jen.Id("zs").Index(jen.Id("p")).Op("+=").Id("a"),
		linSRow(),
		aftForC(aftAtC("sr").Op("+=").Id("a").Op("*").Add(aftAtC("vr"))),
	)
}

// linOutRow writes row i of the forward from the state (S, z) and fqr:
// rd = 1/(fq_i · z + 1e-6), y_i = rd · fq_i S.
func linOutRow() []jen.Code {
	return []jen.Code{
		jen.Var().Id("den").Float32(),
		aftForP(jen.Id("den").Op("+=").Id("fqr").Index(jen.Id("p")).Op("*").Id("zs").Index(jen.Id("p"))),
		jen.Id("inv").Op(":=").Lit(1).Op("/").Parens(jen.Id("den").Op("+").Lit(1e-6)),
		jen.Id("rd").Index(jen.Id("i").Op("*").Id("Heads")).Op("=").Id("inv"),
		jen.Var().Id("acc").Index(aftID("DH")).Float32(),
		aftForP(
			jen.Id("q").Op(":=").Id("fqr").Index(jen.Id("p")),
			linSRow(),
			aftForC(aftAtC("acc").Op("+=").Id("q").Op("*").Add(aftAtC("sr"))),
		),
		aftForC(aftAtC("yr").Op("=").Add(aftAtC("acc")).Op("*").Id("inv")),
	}
}

// linDyDotY declares dyy = dy_i · y_i (rows dyr, yr).
func linDyDotY() []jen.Code {
	return []jen.Code{
		jen.Var().Id("dyy").Float32(),
		aftForC(jen.Id("dyy").Op("+=").Add(aftAtC("dyr")).Op("*").Add(aftAtC("yr"))),
	}
}

// linDfq writes dfq_i = inv·(S dy_i − dyy·z) from the state (S, z).
func linDfq() jen.Code {
	return aftForP(
		linSRow(),
		jen.Var().Id("acc").Float32(),
		aftForC(jen.Id("acc").Op("+=").Add(aftAtC("sr")).Op("*").Add(aftAtC("dyr"))),
		jen.Id("dfqr").Index(jen.Id("p")).Op("=").Id("inv").Op("*").Parens(jen.Id("acc").Op("-").Id("dyy").Op("*").Id("zs").Index(jen.Id("p"))),
	)
}

// emitLinear emits the causal linear-attention forward.
func emitLinear(f *jen.File, op catalog.Op, cfg catalog.Config) {
	if cfg.Bidirectional {
		emitLinearBi(f, op, cfg)
		return
	}
	doc := fmt.Sprintf(`%s is causal linear attention (kernels.LinearFunc) for D = %d, DH = %d,
Heads = %d: for i < t, with S_i = Σ_{j≤i} fk_j v_jᵀ and z_i = Σ_{j≤i} fk_j,

	rd[i·Heads] = 1 / (fq_i · z_i + 1e-6)
	y[i·D+c]    = rd[i·Heads] · Σ_{p<DH} fq[i·D+p] · S_i[p, c]

(overwrite). The DH×DH state is updated row by row.`, Name(op), cfg.D, cfg.DH, cfg.Heads)
	row := []jen.Code{
		aftHeadRow("fkr", "fk", "i"),
		aftHeadRow("vr", "v", "i"),
		aftHeadRow("fqr", "fq", "i"),
		aftHeadRow("yr", "y", "i"),
		jen.Comment("S += fk_i v_iᵀ, z += fk_i."),
		linAddKV(),
	}
	row = append(row, linOutRow()...)
	funcDecl(f, op, doc,
		linSizes(cfg),
		jen.Var().Id("s").Index(jen.Id("DH").Op("*").Id("DH")).Float32().Comment("S[p, c] at s[p·DH+c]"),
		jen.Var().Id("zs").Index(aftID("DH")).Float32(),
		forRows(row...),
	)
}

// emitLinearBack emits the causal linear-attention backward.
func emitLinearBack(f *jen.File, op catalog.Op, cfg catalog.Config) {
	if cfg.Bidirectional {
		emitLinearBackBi(f, op, cfg)
		return
	}
	doc := fmt.Sprintf(`%s is the backward of causal linear attention (kernels.LinearBackFunc)
for D = %d, DH = %d, Heads = %d. With a_i = rd_i·dy_i, b_i = −rd_i·(dy_i · y_i),
S_i = Σ_{j≤i} fk_j v_jᵀ and z_i = Σ_{j≤i} fk_j it overwrites

	dfq[i·D+p] = Σ_c S_i[p, c]·a_i[c] + b_i·z_i[p]
	dfk[j·D+p] = Σ_{j≤i<t} (a_i · v_j + b_i) · fq[i·D+p]
	dv[j·D+c]  = Σ_{j≤i<t} (fq_i · fk_j) · a_i[c]

dfq in a forward sweep with S_i and z_i, dfk and dv in a reverse sweep
with G_j = Σ_{i≥j} fq_i a_iᵀ and h_j = Σ_{i≥j} b_i fq_i.`, Name(op), cfg.D, cfg.DH, cfg.Heads)
	fwd := []jen.Code{
		aftHeadRow("fkr", "fk", "i"),
		aftHeadRow("vr", "v", "i"),
		aftHeadRow("dyr", "dy", "i"),
		aftHeadRow("yr", "y", "i"),
		aftHeadRow("dfqr", "dfq", "i"),
		jen.Id("inv").Op(":=").Id("rd").Index(jen.Id("i").Op("*").Id("Heads")),
		linAddKV(),
	}
	fwd = append(fwd, linDyDotY()...)
	fwd = append(fwd, linDfq())
	rev := []jen.Code{
		aftHeadRow("fqr", "fq", "j"),
		aftHeadRow("fkr", "fk", "j"),
		aftHeadRow("vr", "v", "j"),
		aftHeadRow("dyr", "dy", "j"),
		aftHeadRow("yr", "y", "j"),
		aftHeadRow("dfkr", "dfk", "j"),
		aftHeadRow("dvr", "dv", "j"),
		jen.Id("inv").Op(":=").Id("rd").Index(jen.Id("j").Op("*").Id("Heads")),
	}
	rev = append(rev, linDyDotY()...)
	rev = append(rev,
		jen.Id("bj").Op(":=").Op("-").Id("inv").Op("*").Id("dyy"),
		jen.Comment("G += fq_j a_jᵀ, h += b_j fq_j; then dfk_j = G v_j + h and dv_j = Gᵀ fk_j."),
		jen.Var().Id("acc").Index(aftID("DH")).Float32(),
		aftForP(
			jen.Id("q").Op(":=").Id("fqr").Index(jen.Id("p")),
			jen.Id("hs").Index(jen.Id("p")).Op("+=").Id("bj").Op("*").Id("q"),
			jen.Id("qi").Op(":=").Id("q").Op("*").Id("inv"),
			linSRow(),
			jen.Id("kp").Op(":=").Id("fkr").Index(jen.Id("p")),
			jen.Var().Id("sv").Float32(),
			aftForC(
				aftAtC("sr").Op("+=").Id("qi").Op("*").Add(aftAtC("dyr")),
				jen.Id("sv").Op("+=").Add(aftAtC("sr")).Op("*").Add(aftAtC("vr")),
				aftAtC("acc").Op("+=").Id("kp").Op("*").Add(aftAtC("sr")),
			),
			jen.Id("dfkr").Index(jen.Id("p")).Op("=").Id("sv").Op("+").Id("hs").Index(jen.Id("p")),
		),
		jen.Copy(jen.Id("dvr"), jen.Id("acc").Index(jen.Empty(), jen.Empty())),
	)
	funcDecl(f, op, doc,
		linSizes(cfg),
		jen.Var().Id("s").Index(jen.Id("DH").Op("*").Id("DH")).Float32().Comment("S_i, then G_j, at s[p·DH+c]"),
		jen.Var().List(aftID("zs"), aftID("hs")).Index(aftID("DH")).Float32(),
		jen.Comment("Forward sweep: dfq."),
		forRows(fwd...),
		jen.Clear(jen.Id("s").Index(jen.Empty(), jen.Empty())),
		jen.Comment("Reverse sweep: dfk and dv."),
		aftForBack("j", rev...),
	)
}
