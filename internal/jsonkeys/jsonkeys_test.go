package jsonkeys

import (
	"errors"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		in   string
		key  string // "" for no duplicate
		path string
	}{
		{`{"n":64,"d":128}`, "", ""},
		{`{"n":64,"n":128}`, "n", ""},
		{`{"a":{"x":1,"y":2},"b":{"x":1}}`, "", ""},
		{`{"__metadata__":{"step":"1","step":"2"}}`, "step", "__metadata__"},
		{`{"a":[{"k":1},{"k":2,"k":3}]}`, "k", "a"},
		{`[1,"x",{"a":null,"b":true}]`, "", ""},
		{`"s"`, "", ""},
	} {
		err := Check([]byte(c.in))
		var d *DuplicateError
		switch {
		case c.key == "" && err != nil:
			t.Errorf("%s: %v", c.in, err)
		case c.key != "" && (!errors.As(err, &d) || d.Key != c.key || strings.Join(d.Path, ".") != c.path):
			t.Errorf("%s: %v, want key %q in %q", c.in, err, c.key, c.path)
		}
	}
	if err := Check([]byte(strings.Repeat("[", MaxDepth+2) + strings.Repeat("]", MaxDepth+2))); err == nil {
		t.Error("deep nesting accepted")
	}
	if err := Check([]byte(`{"a":1} x`)); err == nil {
		t.Error("trailing text accepted")
	}
}
