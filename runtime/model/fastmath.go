package model

import "math"

// exp32 is e^x in float32 (within about 2 ulp) for x in [−87, 88]; 0 below
// that range, e^88 above it (expInPlace on one value).
func exp32(x float32) float32 {
	v := [1]float32{x}
	expInPlace(v[:])
	return v[0]
}

// expInPlace replaces every x[c] by e^x[c], as exp32 describes: branch-free
// rounding (the 1.5·2²³ trick) and Cephes' expf polynomial on
// [−ln2/2, ln2/2], in one loop over the slice.
func expInPlace(x []float32) {
	const (
		log2e = 1.4426950408889634
		ln2Hi = 0.693359375
		ln2Lo = -2.12194440e-4
		magic = 12582912 // 1.5·2²³: adding it rounds to an integer
	)
	for c, v := range x {
		if v < -87 {
			x[c] = 0
			continue
		}
		v = min(v, 88)
		t := v*log2e + magic
		n := int32(math.Float32bits(t)) - 0x4b400000 // round(v·log2e)
		fn := t - magic
		r := v - fn*ln2Hi - fn*ln2Lo
		p := float32(1.9875691500e-4)
		p = p*r + 1.3981999507e-3
		p = p*r + 8.3334519073e-3
		p = p*r + 4.1665795894e-2
		p = p*r + 1.6666665459e-1
		p = p*r + 5.0000001201e-1
		p = p*r*r + r + 1
		x[c] = p * math.Float32frombits(uint32(n+127)<<23)
	}
}
