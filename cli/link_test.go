package cli

// The tests run the commands over the repository's shipped specs.
import _ "github.com/synthgen/synthgen/generated/all"
