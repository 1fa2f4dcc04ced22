package specs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary documents to the spec parser and validator. A
// rejection must be an error naming the file, never a panic; an accepted
// spec must pass Validate, and its canonical JSON must parse back to the
// same spec. The seed corpus is every shipped spec plus broken ones.
//
//	go test ./specs -run '^$' -fuzz '^FuzzParse$' -fuzztime 5s
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("*.json")
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		``, `null`, `[]`, `{}`, `{"name": "x"}`, `{"name":"x","n":1e400,"d":1,"heads":1,"layers":1,"variant":"random"}`,
		`{"name":"x","n":64,"d":64,"heads":0,"layers":1,"variant":"random"}`,
		`{"name":"x","n":64,"d":64,"heads":2,"layers":1,"variant":"factorized_dense","a":8,"b":8}`,
		`{"name":"x","n":64,"d":64,"heads":2,"layers":1,"variant":"factorized_dense","a":-8,"b":-8}`,
		`{"name":"x","n":8192,"d":64,"heads":2,"layers":1,"variant":"factorized_dense","a":1073741824,"b":1073741824}`,
		`{"name":"x","n":64,"d":64,"heads":2,"layers":1,"variant":"aft_local","window":65}`,
		`{"name":"x","n":64,"d":64,"heads":2,"layers":1,"variant":"random+random"}`,
		`{"name":"x","n":64,"d":64,"heads":2,"layers":1,"variant":"random","vocab":257}`,
		`{"name":"x","n":64.5,"d":64,"heads":2,"layers":1,"variant":"random"}`,
		`{"name":"x","n":64,"d":64,"heads":2,"layers":1,"variant":"random"} {}`,
		`{"name":"X","n":64,"d":64,"heads":2,"layers":1,"variant":"random","extra":1}`,
	} {
		f.Add([]byte(s))
	}
	const file = "fuzz/spec.json"
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse(file, b)
		if err != nil {
			if !strings.HasPrefix(err.Error(), file+": ") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("Parse accepted %s but Validate says %v", b, err)
		}
		if s.DH()*s.Heads != s.D || s.A*s.B > MaxN*MaxN {
			t.Fatalf("accepted %+v", s)
		}
		back, err := Parse(file, []byte(s.JSON()))
		if err != nil || *back != *s {
			t.Fatalf("canonical JSON %s of %+v parses to %+v, %v", s.JSON(), s, back, err)
		}
	})
}
