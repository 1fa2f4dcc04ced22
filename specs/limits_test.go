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

// TestUpperBounds: d, layers and ffn past their limits are errors naming
// the field and the limit; the limits themselves are accepted.
func TestUpperBounds(t *testing.T) {
	base := `{"name":"x","n":64,"heads":2,"variant":"random",`
	for _, c := range []struct {
		doc, field, limit string
	}{
		{base + `"d":65536,"layers":1}`, "d", "8192"},
		{base + `"d":64,"layers":1000000000}`, "layers", "256"},
		{base + `"d":64,"layers":1,"ffn":1000000}`, "ffn", "32768"},
		{base + `"d":16384,"layers":1,"ffn":64}`, "d", "8192"},
	} {
		_, err := Parse("big.json", []byte(c.doc))
		var e *Error
		if !errors.As(err, &e) || e.Field != c.field || !strings.Contains(err.Error(), c.limit) {
			t.Errorf("%s: %v, want an error naming %s and %s", c.doc, err, c.field, c.limit)
		}
	}
	if _, err := Parse("max.json", []byte(base+`"d":8192,"layers":256}`)); err != nil {
		t.Errorf("the limits themselves: %v", err)
	}
}
