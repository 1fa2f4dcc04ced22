// Package jsonkeys finds a key given twice in one JSON object, which
// encoding/json accepts silently (the last value wins), so that a spec, a
// safetensors header or its metadata that says two things is an error
// rather than half ignored.
package jsonkeys

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// MaxDepth bounds the nesting Check follows.
const MaxDepth = 1000

// DuplicateError is a key given twice in one object.
type DuplicateError struct {
	Key  string   // the key given twice
	Path []string // the keys of the objects that hold it, outermost first ([] at the top level)
}

func (e *DuplicateError) Error() string {
	if len(e.Path) == 0 {
		return fmt.Sprintf("key %q is given twice", e.Key)
	}
	return fmt.Sprintf("key %q is given twice in %q", e.Key, strings.Join(e.Path, "."))
}

// Check returns a *DuplicateError for the first key that appears twice
// in one object of the JSON text b, at any depth, or nil when there is
// none. Malformed JSON is an error too (callers usually decode b first and
// report that themselves).
func Check(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := value(dec, nil, 0); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("text after the JSON value")
	}
	return nil
}

// value reads one JSON value from dec, checking its objects' keys; path
// names the enclosing objects.
func value(dec *json.Decoder, path []string, depth int) error {
	if depth > MaxDepth {
		return fmt.Errorf("JSON nested deeper than %d levels", MaxDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	switch d {
	case '{':
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			k, _ := kt.(string)
			if seen[k] {
				return &DuplicateError{Key: k, Path: append([]string{}, path...)}
			}
			seen[k] = true
			if err := value(dec, append(path, k), depth+1); err != nil {
				return err
			}
		}
	case '[':
		for dec.More() {
			if err := value(dec, path, depth+1); err != nil {
				return err
			}
		}
	}
	_, err = dec.Token() // the closing delimiter
	return err
}
