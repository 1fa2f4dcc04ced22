module example.com/synthmodels

go 1.26.0

require github.com/synthgen/synthgen v0.0.0

require (
	github.com/dave/jennifer v1.7.1 // indirect
	github.com/mmcloughlin/avo v0.6.0 // indirect
	golang.org/x/mod v0.42.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/tools v0.52.0 // indirect
)

// A clone of synthgen beside this module; a released version needs no replace.
replace github.com/synthgen/synthgen => ../

tool github.com/synthgen/synthgen/cmd/synthgen
