package model

import "math"

// exp32 is e^x in float32 (within about 2 ulp) for x in [−87, 88]; 0 below
// that range, e^88 above it. Branch-free rounding (the 1.5·2²³ trick) and
// Cephes' expf polynomial on [−ln2/2, ln2/2].
func exp32(x float32) float32 {
	const (
		log2e = 1.4426950408889634
		ln2Hi = 0.693359375
		ln2Lo = -2.12194440e-4
		magic = 12582912 // 1.5·2²³: adding it rounds to an integer
	)
	if x < -87 {
		return 0
	}
	if x > 88 {
		x = 88
	}
	t := x*log2e + magic
	n := int32(math.Float32bits(t)) - 0x4b400000 // round(x·log2e)
	fn := t - magic
	r := x - fn*ln2Hi - fn*ln2Lo
	p := float32(1.9875691500e-4)
	p = p*r + 1.3981999507e-3
	p = p*r + 8.3334519073e-3
	p = p*r + 4.1665795894e-2
	p = p*r + 1.6666665459e-1
	p = p*r + 5.0000001201e-1
	p = p*r*r + r + 1
	return p * math.Float32frombits(uint32(n+127)<<23)
}

// The coefficients of tanhRational (Eigen's generic_fast_tanh_float).
const (
	tanhClamp = 7.90531110763549805
	tanhA1    = 4.89352455891786e-03
	tanhA3    = 6.37261928875436e-04
	tanhA5    = 1.48572235717979e-05
	tanhA7    = 5.12229709037114e-08
	tanhA9    = -8.60467152213735e-11
	tanhA11   = 2.00018790482477e-13
	tanhA13   = -2.76076847742355e-16
	tanhB0    = 4.89352518554385e-03
	tanhB2    = 2.26843463243900e-03
	tanhB4    = 1.18534705686654e-04
	tanhB6    = 1.19825839466702e-06
)

// tanhRational is tanh(x) in float32 as Eigen's fast rational approximation
// (a 13/6 odd/even polynomial ratio on [−7.9, 7.9], clamped outside):
// absolute error below 4e-7, no exp, no branches. The GELU loops inline it
// by hand.
func tanhRational(x float32) float32 {
	x = min(max(x, -tanhClamp), tanhClamp)
	x2 := x * x
	p := x2*tanhA13 + tanhA11
	p = x2*p + tanhA9
	p = x2*p + tanhA7
	p = x2*p + tanhA5
	p = x2*p + tanhA3
	p = x2*p + tanhA1
	q := x2*tanhB6 + tanhB4
	q = x2*q + tanhB2
	q = x2*q + tanhB0
	return x * p / q
}

// geluForward writes g[i] = gelu(u[i]) = 0.5·u·(1 + tanh(√(2/π)·(u + 0.044715·u³)))
// and replaces u[i] by gelu'(u[i]), which is all the backward needs. Four
// elements at a time with their dependency chains interleaved (the rational
// tanh is latency-bound one element at a time).
func geluForward(u, g []float32) {
	g = g[:len(u)]
	i := 0
	for ; i+3 < len(u); i += 4 {
		x0, x1, x2, x3 := u[i], u[i+1], u[i+2], u[i+3]
		s0, s1, s2, s3 := x0*x0, x1*x1, x2*x2, x3*x3
		t0, t1, t2, t3 := tanh4(geluC*(x0+0.044715*s0*x0), geluC*(x1+0.044715*s1*x1),
			geluC*(x2+0.044715*s2*x2), geluC*(x3+0.044715*s3*x3))
		g[i] = 0.5 * x0 * (1 + t0)
		g[i+1] = 0.5 * x1 * (1 + t1)
		g[i+2] = 0.5 * x2 * (1 + t2)
		g[i+3] = 0.5 * x3 * (1 + t3)
		u[i] = 0.5*(1+t0) + 0.5*x0*(1-t0*t0)*geluC*(1+3*0.044715*s0)
		u[i+1] = 0.5*(1+t1) + 0.5*x1*(1-t1*t1)*geluC*(1+3*0.044715*s1)
		u[i+2] = 0.5*(1+t2) + 0.5*x2*(1-t2*t2)*geluC*(1+3*0.044715*s2)
		u[i+3] = 0.5*(1+t3) + 0.5*x3*(1-t3*t3)*geluC*(1+3*0.044715*s3)
	}
	for ; i < len(u); i++ {
		x := u[i]
		s := x * x
		t := tanhRational(geluC * (x + 0.044715*s*x))
		g[i] = 0.5 * x * (1 + t)
		u[i] = 0.5*(1+t) + 0.5*x*(1-t*t)*geluC*(1+3*0.044715*s)
	}
}

// tanh4 is tanhRational of four values with the chains interleaved; it
// computes exactly what tanhRational does for each.
func tanh4(z0, z1, z2, z3 float32) (t0, t1, t2, t3 float32) {
	z0 = min(max(z0, -tanhClamp), tanhClamp)
	z1 = min(max(z1, -tanhClamp), tanhClamp)
	z2 = min(max(z2, -tanhClamp), tanhClamp)
	z3 = min(max(z3, -tanhClamp), tanhClamp)
	s0, s1, s2, s3 := z0*z0, z1*z1, z2*z2, z3*z3
	p0, p1, p2, p3 := s0*tanhA13+tanhA11, s1*tanhA13+tanhA11, s2*tanhA13+tanhA11, s3*tanhA13+tanhA11
	q0, q1, q2, q3 := s0*tanhB6+tanhB4, s1*tanhB6+tanhB4, s2*tanhB6+tanhB4, s3*tanhB6+tanhB4
	p0, p1, p2, p3 = s0*p0+tanhA9, s1*p1+tanhA9, s2*p2+tanhA9, s3*p3+tanhA9
	q0, q1, q2, q3 = s0*q0+tanhB2, s1*q1+tanhB2, s2*q2+tanhB2, s3*q3+tanhB2
	p0, p1, p2, p3 = s0*p0+tanhA7, s1*p1+tanhA7, s2*p2+tanhA7, s3*p3+tanhA7
	q0, q1, q2, q3 = s0*q0+tanhB0, s1*q1+tanhB0, s2*q2+tanhB0, s3*q3+tanhB0
	p0, p1, p2, p3 = s0*p0+tanhA5, s1*p1+tanhA5, s2*p2+tanhA5, s3*p3+tanhA5
	p0, p1, p2, p3 = s0*p0+tanhA3, s1*p1+tanhA3, s2*p2+tanhA3, s3*p3+tanhA3
	p0, p1, p2, p3 = s0*p0+tanhA1, s1*p1+tanhA1, s2*p2+tanhA1, s3*p3+tanhA1
	return z0 * p0 / q0, z1 * p1 / q1, z2 * p2 / q2, z3 * p3 / q3
}
