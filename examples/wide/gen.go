package wide

// The kernels of spec wide.json: n 96, d 96, 3 heads, 2 layers, dense
// synthesizer mixed with dot-product attention (sizes that are not
// multiples of the vector width, on purpose).

//go:generate go tool synthgen -spec wide.json -out .
