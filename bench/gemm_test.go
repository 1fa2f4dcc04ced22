package bench

import "testing"

// BenchmarkGemm runs the linear layers' products of the bench specs
// (default mid) on one core, generated micro-kernels beside gonum.
//
//	go test ./bench -run '^$' -bench Gemm -count 6 | tee gemm.txt
//	benchstat -col /impl gemm.txt
func BenchmarkGemm(b *testing.B) {
	for _, name := range benchSpecs() {
		cases, err := GemmCases(name)
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range cases {
			b.Run(c.Name, func(b *testing.B) {
				for b.Loop() {
					c.Run()
				}
				reportFlops(b, c)
			})
		}
	}
}
