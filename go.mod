module github.com/synthgen/synthgen

go 1.26.0

require (
	github.com/dave/jennifer v1.7.1
	github.com/mmcloughlin/avo v0.6.0
	golang.org/x/sys v0.49.0
	gonum.org/v1/gonum v0.17.0
)

require (
	golang.org/x/mod v0.42.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/tools v0.52.0 // indirect
)
