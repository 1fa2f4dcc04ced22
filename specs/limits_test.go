package specs

import (
	"errors"
	"strings"
	"testing"
)

// TestDuplicateKey: a field given twice is an error naming it, not the
// last value silently.
func TestDuplicateKey(t *testing.T) {
	for _, c := range []struct{ doc, field string }{
		{`{"name":"x","n":64,"n":128,"d":64,"heads":2,"layers":1,"variant":"random"}`, "n"},
		{`{"name":"x","n":64,"d":64,"heads":2,"layers":1,"variant":"random","variant":"dense"}`, "variant"},
		{`{"name":"x","n":64,"d":64,"heads":2,"layers":1,"variant":"random","\u006e":64}`, "n"},
	} {
		_, err := Parse("dup.json", []byte(c.doc))
		var e *Error
		if !errors.As(err, &e) || e.Field != c.field || !strings.Contains(err.Error(), "twice") || !strings.HasPrefix(err.Error(), "dup.json: ") {
			t.Errorf("%s: %v, want an error naming field %q", c.doc, err, c.field)
		}
	}
}
